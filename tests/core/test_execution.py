import logging
import pathlib
import random
from typing import Any, Dict, List

import numpy as np
import pytest

import determined as det
from determined import _execution, core, errors

EVENTS: List[Dict[str, Any]] = []


class CountingController(det.TrialController):
    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: core.DistributedContext) -> None:
        EVENTS.append({"hook_seed": trial_seed, "python": random.random(), "numpy": float(np.random.rand())})

    def run(self) -> None:
        trial = self.trial_class(self.context)
        steps = 0
        for op in self.core.searcher.operations():
            batch_metrics = []
            while steps < op.length:
                steps += 1
                batch_metrics.append({"loss": trial.loss(steps)})
            self.core.train.report_training_metrics(steps, {"loss": trial.loss(steps)}, batch_metrics)
            self.core.train.report_validation_metrics(steps, {"validation_loss": trial.loss(steps)})
            with self.core.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
                (path / "state").write_text(str(steps))
                EVENTS.append({"checkpoint_path": self.core.checkpoint.storage_manager.path_of(uuid)})
            op.report_completed(trial.loss(steps))
        EVENTS.append({"scheduling_unit": self.context.get_experiment_config()["scheduling_unit"]})


class CountingTrial(det.Trial):
    trial_controller_class = CountingController

    def __init__(self, context: det.TrialContext) -> None:
        self.context = context
        self.lr = context.get_hparam("lr")

    def loss(self, steps: int) -> float:
        return self.lr / steps


CONFIG = {
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 50}},
    "hyperparameters": {"global_batch_size": 8, "lr": {"type": "double", "minval": 0.1, "maxval": 0.2}},
    "resources": {"slots_per_trial": 4},
    "reproducibility": {"experiment_seed": 99},
}


@pytest.fixture(autouse=True)
def clear_events() -> None:
    EVENTS.clear()


def test_test_one_batch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined")
    summary = _execution.test_one_batch(CountingTrial, CONFIG)
    lr = summary["hparams"]["lr"]
    assert 0.1 <= lr <= 0.2 and summary["hparams"]["global_batch_size"] == 8
    assert summary["training_metrics"] == {"loss": lr}
    assert summary["batch_metrics"] == [{"loss": lr}]
    assert summary["validation_metrics"] == {"validation_loss": lr}
    assert summary["checkpoint_resources"].pop("metadata.json") > 0
    assert summary["checkpoint_resources"] == {"state": 1}
    stored = [e["checkpoint_path"] for e in EVENTS if "checkpoint_path" in e]
    assert len(stored) == 1 and stored[0].name == summary["checkpoint_uuid"]
    assert not stored[0].exists() and not stored[0].parent.exists()  # the temporary storage is gone
    assert {"scheduling_unit": 1} in EVENTS
    assert "test mode ignores the config's 'resources' section" in caplog.text


def test_test_one_batch_with_given_hparams_and_seeding() -> None:
    summary = _execution.test_one_batch(CountingTrial, CONFIG, hparams={"lr": 0.5, "global_batch_size": 8})
    assert summary["training_metrics"] == {"loss": 0.5}
    hook = EVENTS[0]
    assert hook["hook_seed"] == 99
    random.seed(99)
    np.random.seed(99)
    assert hook["python"] == random.random() and hook["numpy"] == float(np.random.rand())


def test_run_trial_reports_through_the_core_context(tmp_path: pathlib.Path) -> None:
    ctx = core._make_local_context(str(tmp_path), [2, 5], {"scheduling_unit": 3}, {"lr": 1.0}, trial_seed=5)
    _execution.run_trial(CountingTrial, ctx)
    assert [c["steps_completed"] for c in ctx.checkpoint.reported] == [2, 5]
    assert ctx.searcher.completed_operations == [{"length": 2, "metric": 0.5}, {"length": 5, "metric": 0.2}]
    assert len(ctx.train.training_history[1]["batch_metrics"]) == 3
    assert (tmp_path / ctx.checkpoint.reported[1]["uuid"] / "state").read_text() == "5"


def test_run_trial_needs_a_controller(tmp_path: pathlib.Path) -> None:
    class Bare(det.Trial):
        pass

    ctx = core._make_local_context(str(tmp_path), [1], {}, {})
    with pytest.raises(errors.InvalidTrialError, match="Bare has no trial_controller_class"):
        _execution.run_trial(Bare, ctx)
    with pytest.raises(errors.InvalidTrialError, match="is not a Trial class"):
        _execution.run_trial(dict, ctx)  # type: ignore[arg-type]


def test_create_trial_instance(tmp_path: pathlib.Path) -> None:
    ckpts = tmp_path / "ckpts"
    trial = _execution.create_trial_instance(CountingTrial, str(ckpts), config=CONFIG)
    assert isinstance(trial, CountingTrial)
    assert 0.1 <= trial.lr <= 0.2
    assert trial.context.get_per_slot_batch_size() == 8
    with trial.context.core.checkpoint.store_path({"steps_completed": 0}) as (path, uuid):
        (path / "f").write_text("x")
    assert (ckpts / uuid / "f").read_text() == "x"

    default = _execution.create_trial_instance(CountingTrial, str(ckpts), hparams={"lr": 3.0, "global_batch_size": 2})
    assert default.lr == 3.0
    assert default.context.get_experiment_config()["searcher"]["name"] == "single"
    assert default.context.get_experiment_config()["hyperparameters"]["lr"] == {"type": "const", "val": 3.0}
    without = _execution.create_trial_instance(CountingTrial, str(ckpts), hparams={"lr": 3.0})  # 0.38: not needed
    with pytest.raises(errors.InvalidTrialError, match="global_batch_size: missing"):
        without.context.get_per_slot_batch_size()  # until the trial asks for its batch size


def test_create_trial_instance_reports_bad_config(tmp_path: pathlib.Path) -> None:
    from determined.config import InvalidExperimentConfig

    with pytest.raises(InvalidExperimentConfig, match="max_restarts"):
        _execution.create_trial_instance(CountingTrial, str(tmp_path), config={"max_restarts": -1}, hparams={})


class CwdTrial(CountingTrial):
    """Reads a file of its context dir by a relative path, as model code does."""

    def __init__(self, context: det.TrialContext) -> None:
        super().__init__(context)
        self.lr = float(pathlib.Path("lr.txt").read_text())


def test_create_local_test_runs_the_code_in_context_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from determined.experimental import create

    context_dir = tmp_path / "ctx"
    context_dir.mkdir()
    (context_dir / "lr.txt").write_text("0.5")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    summary = create(CwdTrial, CONFIG, local=True, test=True, context_dir=str(context_dir))
    assert summary["validation_metrics"] == {"validation_loss": 0.5}  # lr read from context_dir, one batch
    assert pathlib.Path.cwd() == elsewhere  # the working directory is given back
    with pytest.raises(errors.DeterminedError, match="context_dir .*missing.* is not a directory"):
        create(CwdTrial, CONFIG, local=True, test=True, context_dir=str(tmp_path / "missing"))


def test_create_reads_a_yaml_path_or_text_as_yaml_1_2(tmp_path: pathlib.Path) -> None:
    from determined.experimental import create

    path = tmp_path / "exp.yaml"
    path.write_text("hyperparameters:\n  lr: 1e-4\n  global_batch_size: 8\n"
                    "searcher: {name: single, metric: validation_loss, max_length: 5}\n")
    for config in (str(path), path, path.read_text()):
        summary = create(CountingTrial, config, local=True, test=True)
        assert summary["hparams"]["lr"] == 1e-4 and summary["training_metrics"] == {"loss": 1e-4}
