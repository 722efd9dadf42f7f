"""Exact resume: N batches straight == N/2 batches, a checkpoint, then a restored trial to N."""
import pathlib
from typing import Dict

import numpy as np
import pytest
import tensorflow as tf

from determined.keras import _checkpoint
from tests.keras import _keras_trials as trials


def _variables(ckpt_dir: pathlib.Path, uuid: str) -> Dict[str, np.ndarray]:
    """Every variable of the checkpoint's weights file: model weights and optimizer state."""
    reader = tf.train.load_checkpoint(str(ckpt_dir / uuid / _checkpoint.WEIGHTS_FILE))
    names = [n for n in reader.get_variable_to_shape_map() if not n.startswith("_CHECKPOINTABLE")]
    return {name: reader.get_tensor(name) for name in names}


@pytest.mark.parametrize(
    "trial_class", [trials.ArrayTrial, trials.SequenceTrial, trials.AdapterThreadsTrial], ids=lambda c: c.__name__
)
def test_resume_is_exact(trial_class: type, tmp_path: pathlib.Path) -> None:
    # 8 batches per epoch: the pause at 12 is mid-epoch, after one reshuffle, and 24 crosses another epoch end.
    config = trials.make_config(length=24, scheduling_unit=4)
    straight = trials.run_trial(trial_class, tmp_path / "a", [24], config)

    first = trials.run_trial(trial_class, tmp_path / "b", [12], config)
    [half] = first.checkpoint.reported
    resumed = trials.run_trial(
        trial_class, tmp_path / "b", [24], config, latest_checkpoint=half["uuid"], steps_completed=12
    )
    [end] = resumed.checkpoint.reported
    assert end["steps_completed"] == 24

    expected = _variables(tmp_path / "a", straight.checkpoint.reported[-1]["uuid"])
    got = _variables(tmp_path / "b", end["uuid"])
    assert expected.keys() == got.keys()
    assert any("optimizer" in name for name in expected), "the optimizer state is checkpointed"
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    # The batches after the resume are the same batches, so the same losses.
    straight_losses = [m["loss"] for h in straight.train.training_history for m in h["batch_metrics"]]
    resumed_losses = [m["loss"] for h in first.train.training_history + resumed.train.training_history
                      for m in h["batch_metrics"]]
    assert resumed_losses == straight_losses


def test_dataset_resumes_from_its_beginning(tmp_path: pathlib.Path) -> None:
    """The documented limit: weights and optimizer are restored, the tf.data.Dataset starts over."""
    config = trials.make_config(length=6, scheduling_unit=3)
    first = trials.run_trial(trials.DatasetTrial, tmp_path / "c", [3], config)
    resumed = trials.run_trial(
        trials.DatasetTrial, tmp_path / "c", [6], config,
        latest_checkpoint=first.checkpoint.reported[0]["uuid"], steps_completed=3,
    )
    assert [h["steps_completed"] for h in resumed.train.training_history] == [6]
    assert resumed.checkpoint.reported[-1]["steps_completed"] == 6


def test_warm_start_loads_weights_but_counts_from_zero(tmp_path: pathlib.Path) -> None:
    config = trials.make_config(length=8, scheduling_unit=8)
    source = trials.run_trial(trials.ArrayTrial, tmp_path / "d", [8], config)
    uuid = source.checkpoint.reported[0]["uuid"]
    warm = trials.run_trial(trials.ArrayTrial, tmp_path / "d", [8], config, latest_checkpoint=uuid,
                            steps_completed=0)
    assert [h["steps_completed"] for h in warm.train.training_history] == [8]
    # It continued from trained weights: its first losses are below the fresh trial's.
    assert warm.train.training_history[0]["metrics"]["loss"] < source.train.training_history[0]["metrics"]["loss"]
