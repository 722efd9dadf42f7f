"""Real training with each of the five kinds of data loader (and the variants of arrays and adapters)."""
import pathlib

import pytest

from tests.keras import _keras_trials as trials


@pytest.mark.parametrize("trial_class", trials.LOADER_TRIALS, ids=lambda c: c.__name__)
def test_each_loader_kind_trains(trial_class: type, tmp_path: pathlib.Path) -> None:
    ctx = trials.run_trial(trial_class, tmp_path / "ckpt", [40])
    history = ctx.train.training_history
    assert [h["steps_completed"] for h in history] == [10, 20, 30, 40]
    assert all(len(h["batch_metrics"]) == 10 for h in history)
    first, last = history[0]["metrics"], history[-1]["metrics"]
    assert set(first) == {"loss", "accuracy"}
    assert last["loss"] < first["loss"] * 0.8, history
    [validation] = ctx.train.validation_history
    assert validation["steps_completed"] == 40
    assert set(validation["metrics"]) == {"val_loss", "val_accuracy"}
    assert validation["metrics"]["val_accuracy"] > 0.7
    [ckpt] = ctx.checkpoint.reported
    assert ckpt["steps_completed"] == 40
    assert ckpt["framework"].startswith("tensorflow-2.") and ckpt["format"] == "saved_weights"
    assert ctx.searcher.completed_operations == [{"length": 40, "metric": validation["metrics"]["val_loss"]}]
