"""TensorpackTrial (Determined 0.12/0.13) on Tensorpack 0.11 and TF 2.15: trains, validates, checkpoints, resumes;
Evaluators, ScheduleSetter, the TFEventWriter monitor; clear errors."""
import importlib
import pathlib
import sys
from typing import Any, List, Optional

import pytest
import tensorflow as tf
import tensorpack as tp

from determined import _execution, core, errors
from determined import tensorpack as det_tp
from determined.tensorpack._trial import schedule_value
from tests.tensorpack import _tensorpack_trials as trials


def run(trial_class: type, ckpt_dir: pathlib.Path, lengths: List[int], config: Any = None,
        latest: Optional[dict] = None) -> core.Context:
    config = config or trials.make_config()
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    kwargs = {"latest_checkpoint": latest["uuid"], "steps_completed": latest["steps_completed"]} if latest else {}
    with core._make_local_context(str(ckpt_dir), lengths, config, hparams, 11, **kwargs) as context:
        _execution.run_trial(trial_class, context)
    return context


class MonitoredTrial(trials.BandsTrial):
    def tensorpack_monitors(self) -> List[tp.MonitorBase]:
        return [det_tp.TFEventWriter()]


def test_trains_validates_checkpoints_and_resumes(tmp_path: pathlib.Path) -> None:
    first = run(MonitoredTrial, tmp_path, [20])
    history = first.train.training_history
    assert [h["steps_completed"] for h in history] == [10, 20]
    assert set(history[0]["metrics"]) == {"loss", "learning_rate"} and len(history[0]["batch_metrics"]) == 10
    assert history[0]["metrics"]["learning_rate"] == pytest.approx(0.05, rel=0.01)
    [validation] = first.train.validation_history
    assert set(validation["metrics"]) == {"val_accuracy", "val_cross_entropy_loss"}
    [checkpoint] = first.checkpoint.reported
    assert checkpoint["steps_completed"] == 20 and checkpoint["format"] == "tensorpack"
    assert {"model-20.index", "checkpoint", "load_data.json"} <= set(checkpoint["resources"])
    assert first.searcher.completed_operations == [{"length": 20, "metric": validation["metrics"]["val_accuracy"]}]
    events = first.train.get_tensorboard_path() / "tensorpack"  # the TFEventWriter monitor, in the trial's directory
    assert any(p.name.startswith("events.out.tfevents.") for p in events.iterdir())

    resumed = run(trials.BandsTrial, tmp_path, [40], latest=checkpoint)
    later = resumed.train.training_history
    assert [h["steps_completed"] for h in later] == [30, 40]
    # The weights (and Tensorpack's global step) came back: training goes on from where the loss was.
    assert later[-1]["metrics"]["loss"] < history[0]["metrics"]["loss"] * 0.5, (history, later)
    end = resumed.checkpoint.reported[-1]
    assert end["steps_completed"] == 40
    reader = tf.train.load_checkpoint(str(tmp_path / end["uuid"] / "model-40"))
    assert int(reader.get_tensor("global_step")) == 40
    assert resumed.train.validation_history[-1]["metrics"]["val_accuracy"] > 0.9


def test_evaluators_and_a_schedule(tmp_path: pathlib.Path) -> None:
    points = [det_tp.SchedulePoint(0, 0.5, interp="linear"), det_tp.SchedulePoint(10, 0.1)]
    assert [schedule_value(points, s) for s in (0, 5, 10, 99)] == pytest.approx([0.5, 0.3, 0.1, 0.1])
    with pytest.raises(errors.InvalidTrialError, match="must increase"):
        det_tp.ScheduleSetter("lr", points[::-1])

    named = run(trials.ScheduledTrial, tmp_path / "named",
                [12], trials.make_config(metric="lr", evaluator="named"))
    # The schedule sets the variable (initially 1.0) before every step.
    rates = [b["lr"] for h in named.train.training_history for b in h["batch_metrics"]]
    assert rates == pytest.approx([schedule_value(points, step) for step in range(12)])
    assert named.train.validation_history[-1]["metrics"]["lr"] == pytest.approx(0.1)
    weights = run(trials.ScheduledTrial, tmp_path / "weights",
                  [12], trials.make_config(metric="weight_norm", evaluator="weights"))
    assert weights.train.validation_history[-1]["metrics"]["weight_norm"] > 0


class NoValidation(trials.BandsTrial):
    def build_validation_dataflow(self) -> Any:
        return None


class MissingTensor(trials.BandsTrial):
    def training_metrics(self) -> List[str]:
        return ["no_such_tensor"]


@pytest.mark.parametrize("trial_class, message", [
    (NoValidation, "build_validation_dataflow\\(\\) must return the tensorpack DataFlow"),
    (MissingTensor, "the training graph has no tensor 'no_such_tensor'"),
])
def test_clear_errors(trial_class: type, message: str, tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match=message):
        run(trial_class, tmp_path, [4])


def test_import_without_tensorpack_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "determined.tensorpack" or n.startswith("determined.tensorpack.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorpack", None)
    with pytest.raises(ImportError, match="pip install 'determined-revived\\[tensorpack\\]'"):
        importlib.import_module("determined.tensorpack")
