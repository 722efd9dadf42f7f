"""The Trainer API (Determined 0.21-0.38): `det.pytorch.init()` + `Trainer(trial, context).fit(...)`, off the
platform in this process and as `python train.py`, and on an embedded master as a script entrypoint (one slot,
paused and resumed; two slots through determined.launch.torch_distributed)."""
import json
import logging
import os
import pathlib
import pickle
import runpy
import sys
from typing import Any, Dict, Iterator, List, Tuple
from unittest import mock

import pytest
import torch

from determined import core, master, pytorch
from determined.common.api import Session
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.launch.test_script_experiments import ended, logs
from tests.master._helpers import model_def

import _trainer_script
from _trainer_script import RegressionTrial

SCRIPT = pathlib.Path(_trainer_script.__file__).read_text()
HPARAMS = {"lr": 0.1, "epochs": 3}


def _fit(data_dir: pathlib.Path, **fit_kwargs: Any) -> Tuple[pytorch.PyTorchTrialContext, Any]:
    """fit() a fresh RegressionTrial off the platform, with checkpoints in data_dir/checkpoints; (context, core
    context)."""
    with mock.patch.dict(os.environ, {"DET_DATA_DIR": str(data_dir)}):
        with pytorch.init(hparams=HPARAMS, exp_conf={"name": "local"}) as context:
            trial = RegressionTrial(context, HPARAMS)
            pytorch.Trainer(trial, context).fit(**{"checkpoint_policy": "all", **fit_kwargs})
    return context, context.core


def _checkpoints(data_dir: pathlib.Path) -> List[pathlib.Path]:
    return sorted((data_dir / "checkpoints").iterdir(), key=lambda p: p.stat().st_mtime)


def _weights(context: pytorch.PyTorchTrialContext) -> List[torch.Tensor]:
    return [p.detach().clone() for p in context.models[0].parameters()]


def test_fit_off_the_platform_trains_reports_counters_and_writes_the_trainer_checkpoint(tmp_path: pathlib.Path) -> None:
    context, core = _fit(tmp_path, max_length=pytorch.Epoch(3), validation_period=pytorch.Batch([4, 12]),
                         reporting_period=pytorch.Batch(8), checkpoint_period=pytorch.Epoch(2))
    training = core.train.training_history
    assert [r["steps_completed"] for r in training] == [4, 8, 12, 16, 24]  # reports when any boundary fires
    assert training[-1]["metrics"]["batches"] == 24 and training[-1]["metrics"]["epochs"] == 3
    assert training[-1]["metrics"]["loss"] < training[0]["metrics"]["loss"] / 10
    validation = core.train.validation_history
    assert [(r["steps_completed"], r["metrics"]["epochs"]) for r in validation] == [(4, 0), (12, 1), (24, 3)]
    # "all": after each validation, and at Epoch(2) = batch 16
    assert [r["metadata"]["steps_completed"] for r in core.checkpoint.reported] == [4, 12, 16, 24]
    last = tmp_path / "checkpoints" / core.checkpoint.reported[-1]["uuid"]
    assert {"state_dict.pth", "trial_state.pkl", "load_data.json", "metadata.json", "code"} <= {
        p.name for p in last.iterdir()}
    load_data = json.loads((last / "load_data.json").read_text())
    assert load_data["is_trainer"] is True and load_data["trial_cls_spec"] == "_trainer_script:RegressionTrial"
    assert (last / "code" / "_trainer_script.py").is_file()
    with open(last / "trial_state.pkl", "rb") as f:
        state = pickle.load(f)
    assert state["batches_trained"] == 24 and state["epochs_trained"] == 3 and state["last_val"] == 24
    assert json.loads((last / "metadata.json").read_text())["steps_completed"] == 24
    # load_trial_from_checkpoint_path rebuilds the trial from the checkpoint's code/ with its weights
    loaded = pytorch.load_trial_from_checkpoint_path(str(last), trial_kwargs={"hparams": HPARAMS})
    for a, b in zip(loaded.context.models[0].parameters(), _weights(context)):
        assert torch.equal(a.detach(), b)


def test_resuming_from_a_checkpoint_continues_exactly(tmp_path: pathlib.Path) -> None:
    whole, _ = _fit(tmp_path / "whole", max_length=pytorch.Batch(20))
    first, core = _fit(tmp_path / "split", max_length=pytorch.Batch(11))  # stops in the middle of an epoch
    [uuid] = [r["uuid"] for r in core.checkpoint.reported]
    with mock.patch.dict(os.environ, {"DET_DATA_DIR": str(tmp_path / "split")}):
        with pytorch.init(hparams=HPARAMS) as context:
            trial = RegressionTrial(context, HPARAMS)
            torch.manual_seed(123)  # the checkpoint's RNG state replaces whatever this process had
            pytorch.Trainer(trial, context).fit(max_length=pytorch.Batch(20), latest_checkpoint=uuid,
                                                checkpoint_policy="none")
    assert [r["steps_completed"] for r in context.core.train.training_history] == [20]
    for a, b in zip(_weights(context), _weights(whole)):
        assert torch.equal(a, b)


class StopsAtBatch5(RegressionTrial):
    def build_callbacks(self) -> Dict[str, pytorch.PyTorchCallback]:
        context = self.context

        class Stop(pytorch.PyTorchCallback):
            def on_training_workload_end(self, avg_metrics: Dict[str, Any], batch_metrics: Any) -> None:
                context.set_stop_requested(avg_metrics["batches"] >= 5)

        return {"stop": Stop()}


def test_a_stop_request_checkpoints_and_ends_fit_at_the_next_boundary(tmp_path: pathlib.Path) -> None:
    with mock.patch.dict(os.environ, {"DET_DATA_DIR": str(tmp_path)}):
        with pytorch.init(hparams=HPARAMS) as context:
            pytorch.Trainer(StopsAtBatch5(context, HPARAMS), context).fit(
                max_length=pytorch.Batch(20), reporting_period=pytorch.Batch(5), checkpoint_policy="none")
    assert [r["steps_completed"] for r in context.core.train.training_history] == [5]
    assert [r["steps_completed"] for r in context.core.checkpoint.reported] == [5]
    assert context.core.train.early_exit_reason == "USER_REQUESTED_STOP"


def test_fit_rules_off_the_platform(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"fit\(max_length=\.\.\.\) must be set off the platform"):
        _fit(tmp_path)
    with pytest.raises(TypeError, match="must be a det.pytorch.Batch or det.pytorch.Epoch"):
        _fit(tmp_path, max_length=5)
    with pytest.raises(ValueError, match="checkpoint_policy='sometimes'"):
        _fit(tmp_path, max_length=pytorch.Batch(1), checkpoint_policy="sometimes")
    with pytest.warns(UserWarning, match="checkpoint_policy='all' is used"):
        _, core = _fit(tmp_path / "best", max_length=pytorch.Batch(8), validation_period=pytorch.Batch(4),
                       checkpoint_policy="best")
    assert len(_checkpoints(tmp_path / "best")) == 2  # best became all: a checkpoint after each validation
    # test_mode: one training batch, one validation batch, a checkpoint
    _, core = _fit(tmp_path / "test", max_length=pytorch.Epoch(50), test_mode=True)
    assert [r["steps_completed"] for r in core.train.training_history] == [1]
    assert [r["steps_completed"] for r in core.train.validation_history] == [1]
    assert len(_checkpoints(tmp_path / "test")) == 1
    with pytorch.init() as context:
        with pytest.raises(ValueError, match=r"init\(\) was given no hyperparameters"):
            context.get_hparam("lr")
    with pytest.raises(ValueError, match="aggregation_frequency"):
        with pytorch.init(aggregation_frequency=0):
            pass
    # units
    assert pytorch.Batch([5, 30]).should_stop(30) and not pytorch.Batch([5, 30]).should_stop(10)
    assert pytorch.Epoch(0).should_stop(7) and pytorch.Batch(3).should_stop(6) and not pytorch.Batch(3).should_stop(0)


def test_fit_rules_on_the_platform(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    """Inside a trial: no test_mode; max_length from the script, else (deprecated) from searcher.max_length."""
    def trainer(searcher: Dict[str, Any]) -> pytorch.Trainer:
        config = {"searcher": {"name": "single", "metric": "validation_loss", **searcher}}
        core_context = core._make_local_context(str(tmp_path), [], config, HPARAMS)
        core_context._session = object()  # what makes it a trial's context (it is never used here)
        context = pytorch.PyTorchTrialContext(core_context, config, HPARAMS, 0)
        return pytorch.Trainer(RegressionTrial(context, HPARAMS), context)

    with pytest.raises(ValueError, match="runs only off the platform"):
        trainer({}).fit(max_length=pytorch.Batch(1), test_mode=True)
    with pytest.raises(ValueError, match=r"fit\(max_length=X\) must be set"):
        trainer({}).fit()
    asha = {"name": "adaptive_asha", "time_metric": "batches", "max_time": 64}
    with pytest.warns(FutureWarning, match="searcher.max_length"):
        assert trainer({**asha, "max_length": {"epochs": 2}})._length_on_platform(None) == (pytorch.Epoch(2), False)
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="a length without a unit"):
        trainer({**asha, "max_length": 5})._length_on_platform(None)
    # a searcher that gives the lengths itself (searcher operations, as 0.21-0.37): fit() follows it
    with pytest.warns(FutureWarning):
        assert trainer({"max_length": {"batches": 8}})._length_on_platform(None) == (None, True)
    assert trainer({})._length_on_platform(pytorch.Batch(3)) == (pytorch.Batch(3), False)
    with caplog.at_level(logging.WARNING, logger="determined.pytorch"):
        assert trainer(asha)._length_on_platform(pytorch.Epoch(1)) == (pytorch.Epoch(1), False)
    assert "differs from the search's time_metric batches with max_time 64" in caplog.text


def test_the_script_runs_as_python_train_py_off_the_platform(tmp_path: pathlib.Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`python train.py --batches 12`, run in this process (as __main__, with its own argv and working directory)."""
    (tmp_path / "train.py").write_text(SCRIPT)
    with mock.patch.dict(os.environ, {"DET_DATA_DIR": str(tmp_path / "data")}), \
            mock.patch.object(sys, "argv", ["train.py", "--batches", "12"]):
        os.environ.pop("DET_TRIAL_ID", None)
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            runpy.run_path("train.py", run_name="__main__")
        finally:
            os.chdir(cwd)
    assert "train: seed 0 final weight" in capsys.readouterr().out
    [first, last] = _checkpoints(tmp_path / "data")  # after the validation at epoch 1, and at the end
    load_data = json.loads((last / "load_data.json").read_text())
    assert load_data["trial_cls_spec"] == "__main__:RegressionTrial" and (last / "code" / "train.py").is_file()
    with pytest.raises(Exception, match="defined in a script run as __main__.*trial_class="):
        pytorch.load_trial_from_checkpoint_path(str(last))


# -- on the platform ------------------------------------------------------------------------------------------


def _submit(session: Session, config: Dict[str, Any]) -> int:
    config = {"searcher": {"name": "single", "metric": "validation_loss"}, "max_restarts": 0,
              "reproducibility": {"experiment_seed": 11}, "entrypoint": "python3 train.py", **config}
    return int(session.post("/experiments", {"config": config, "model_definition": model_def({"train.py": SCRIPT})})
               ["experiment"]["id"])


def _trial_id(session: Session, exp_id: int) -> int:
    return int(wait_for(lambda: (session.get(f"/experiments/{exp_id}")["trials"] or [None])[0], 60, 0.1,
                        what="a trial")["id"])


def _final(lines: List[str]) -> str:
    return [line for line in lines if "train: seed" in line][-1].split("train: ", 1)[1]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, Dict[str, int]]]:
    embedded = master.start(tmp_path_factory.mktemp("trainer") / "data", slots=Slots(gpus=[], cpu_count=4),
                            preemption_timeout=20)
    session = embedded.session()
    experiments = {
        "paused": _submit(session, {"hyperparameters": {**HPARAMS, "wait_at": 12}}),
        "two_slots": _submit(session, {
            "entrypoint": "python3 -m determined.launch.torch_distributed python3 train.py",
            "hyperparameters": {**HPARAMS, "epochs": 4}, "resources": {"slots_per_trial": 2}}),
    }
    try:
        yield session, experiments
    finally:
        embedded.stop(timeout=10)


def _unpaused_run(tmp_path: pathlib.Path, seed: int) -> str:
    """What the script prints after training the trial of seed `seed` without a pause."""
    core_context = core._make_local_context(str(tmp_path), [], {}, HPARAMS, trial_seed=seed)
    context = pytorch.PyTorchTrialContext(core_context, {}, HPARAMS, seed)
    pytorch.Trainer(RegressionTrial(context, HPARAMS), context).fit(
        max_length=pytorch.Epoch(3), validation_period=pytorch.Epoch(1), reporting_period=pytorch.Batch(4),
        checkpoint_policy="all")
    weight, bias = (float(p.detach()) for p in context.models[0].parameters())
    return f"seed {seed} final weight {weight!r} bias {bias!r}"


def test_a_script_entrypoint_trains_and_resumes_exactly_after_a_pause(
        platform: Tuple[Session, Dict[str, int]], tmp_path: pathlib.Path) -> None:
    session, experiments = platform
    exp_id = experiments["paused"]
    trial_id = _trial_id(session, exp_id)
    wait_for(lambda: any("train: waiting to be paused at batch 12" in line for line in logs(session, trial_id)),
             90, 0.1, what="the script to wait for the pause")
    session.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: session.get(f"/experiments/{exp_id}")["trials"][0].get("status") == "PAUSED", 60, 0.1,
             what="the paused run to checkpoint and exit")
    session.post(f"/experiments/{exp_id}/activate")
    paused = ended(session, exp_id)
    lines = logs(session, trial_id)
    assert paused["experiment"]["state"] == "COMPLETED", "\n".join(lines[-40:])
    assert paused["trials"][0]["restarts"] == 0
    assert any("restored checkpoint" in line and "training continues from batch 13" in line for line in lines), \
        "\n".join(lines[-60:])
    # exactly the weights of a run that was not paused (here, in this process, with the trial's seed)
    assert _final(lines) == _unpaused_run(tmp_path, int(paused["trials"][0]["seed"]))
    metrics = session.get(f"/trials/{trial_id}")
    training = metrics["training_metrics"]
    assert [m["steps_completed"] for m in training] == [4, 8, 12, 13, 16, 20, 24]
    assert training[-1]["metrics"]["batches"] == 24 and training[-1]["metrics"]["epochs"] == 3
    assert training[-1]["metrics"]["loss"] < training[0]["metrics"]["loss"] / 10
    validation = metrics["validation_metrics"]
    assert [(m["steps_completed"], m["metrics"]["epochs"]) for m in validation] == [(8, 1), (16, 2), (24, 3)]


def test_a_script_entrypoint_trains_on_two_slots_through_torch_distributed(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    session, experiments = platform
    desc = ended(session, experiments["two_slots"], 180)
    [trial] = desc["trials"]
    lines = logs(session, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED", "\n".join(lines[-40:])
    metrics = session.get(f"/trials/{trial['id']}")
    training = metrics["training_metrics"]
    # 64 records in batches of 8 over 2 ranks: epochs of 4 batches per rank, 4 epochs
    assert [m["steps_completed"] for m in training] == [4, 8, 12, 16]
    assert [m["metrics"]["epochs"] for m in training] == [1, 2, 3, 4]
    assert training[-1]["metrics"]["loss"] < training[0]["metrics"]["loss"] / 4
    assert any("[rank=1]" in line for line in lines) and any("[rank=0] train: seed" in line for line in lines)
