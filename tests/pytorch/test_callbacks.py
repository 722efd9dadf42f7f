"""PyTorchCallback: every hook fires at its moment with its arguments, over a run with validations and
checkpoints and a resume; callback state survives the resume; shutdown runs however the trial ends."""
import pathlib
import warnings
from typing import Any, Dict, List, Tuple

import pytest
import torch

import determined.pytorch as det_torch
from _pytorch_runs import make_config, run_trial
import _hook_trials
from _hook_trials import EVENTS, HookTrial
from _trials import DropoutTrial

CHECKPOINT_FILES = ["load_data.json", "state_dict.pth"]
UUID_LENGTH = 36


def _config() -> Dict[str, Any]:
    return make_config(
        scheduling_unit=2,
        min_validation_period={"batches": 4},
        hyperparameters={"global_batch_size": 4, "lr": 0.1},
    )


def _validation() -> List[Tuple[Any, ...]]:
    # 10 validation records in batches of 4: 3 batches, batch_idx counted within the validation.
    return [
        ("validation_start",), ("validation_epoch_start",),
        ("evaluate_batch", 0), ("evaluate_batch", 1), ("evaluate_batch", 2),
        ("validation_epoch_end", [["val_loss"]] * 3),
        ("validation_end", ["label_share", "records", "val_loss"]),
    ]


def _checkpoint(steps: int) -> List[Tuple[Any, ...]]:
    return [("checkpoint_save_start", steps), ("checkpoint_write_end", CHECKPOINT_FILES),
            ("checkpoint_upload_end", UUID_LENGTH)]


REPORT = ("training_workload_end", ["loss", "records"], 2)


def test_every_hook_fires_at_its_moment_over_a_run_a_checkpoint_and_a_resume(ckpt_dir: pathlib.Path) -> None:
    EVENTS.clear()
    # 20 training records in batches of 4: epochs of 5 batches. Reports every 2 batches, a validation at 4.
    first = run_trial(HookTrial, ckpt_dir, [6], config=_config())
    assert EVENTS == [
        ("trial_startup", 0, False),
        ("training_start",),
        ("training_epoch_start", 0),
        ("train_batch", 0, 0, True, False),
        ("train_batch", 1, 0, False, False),
        REPORT,
        ("train_batch", 2, 0, False, False),
        ("train_batch", 3, 0, False, False),
        REPORT,
        *_validation(),
        *_checkpoint(4),  # checkpoint_policy best: the first validation is the best so far
        ("train_batch", 4, 0, False, True),
        ("training_epoch_end", 0),
        ("training_epoch_start", 1),
        ("train_batch", 5, 1, True, False),
        REPORT,
        *_validation(),  # the end of the searcher operation
        *_checkpoint(6),
        ("trial_shutdown",),
    ]
    uuid = first.checkpoint.reported[-1]["uuid"]

    EVENTS.clear()
    second = run_trial(HookTrial, ckpt_dir, [8], config=_config(), latest_checkpoint=uuid, steps_completed=6)
    assert EVENTS == [
        ("trial_startup", 6, True),
        # The state dict as on_checkpoint_save_start left it, before anything is restored from it.
        ("checkpoint_load_start", 6, "added by on_checkpoint_save_start at 6"),
        ("load_state_dict", {"validations": 2}),
        ("training_start",),
        ("train_batch", 6, 1, False, False),  # the middle of epoch 1: no epoch start
        ("train_batch", 7, 1, False, False),
        REPORT,
        *_validation(),
        *_checkpoint(8),
        ("trial_shutdown",),
    ]
    state = torch.load(ckpt_dir / second.checkpoint.reported[-1]["uuid"] / "state_dict.pth", weights_only=False)
    assert state["callbacks"] == {"recorder": {"validations": 3}}  # 2 before the resume, 1 after
    assert state["note"] == "added by on_checkpoint_save_start at 8"


class FailingTrial(HookTrial):
    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        if batch_idx == 1:
            raise ValueError("boom in train_batch")
        return super().train_batch(batch, epoch_idx, batch_idx)


def test_trial_shutdown_runs_when_the_trial_fails(ckpt_dir: pathlib.Path) -> None:
    EVENTS.clear()
    with pytest.raises(ValueError, match="boom in train_batch"):
        run_trial(FailingTrial, ckpt_dir, [4], config=_config())
    assert EVENTS[-1] == ("trial_shutdown",)
    assert ("train_batch", 0, 0, True, False) in EVENTS


class OldEpochCallback(det_torch.PyTorchCallback):
    """on_training_epoch_start() without the epoch index, as before 0.17.9."""

    def __init__(self) -> None:
        self.starts = 0

    def on_training_epoch_start(self) -> None:  # type: ignore[override]
        self.starts += 1


class OldEpochTrial(DropoutTrial):
    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        self.old = OldEpochCallback()
        return {"old": self.old}


def test_epoch_start_without_the_index_is_called_with_a_warning(ckpt_dir: pathlib.Path) -> None:
    captured: List[Any] = []

    class Capture(OldEpochTrial):
        def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
            callbacks = super().build_callbacks()
            captured.append(self.old)
            return callbacks

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_trial(Capture, ckpt_dir, [11])
    assert captured[0].starts == 3  # epochs of 5 batches: batches 0, 5 and 10 start one
    assert any("on_training_epoch_start() without the epoch_idx" in str(w.message) for w in caught)


class StopAfterValidation(det_torch.PyTorchCallback):
    """An early-stopping callback: asks to stop at the first validation."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        self.context.set_stop_requested(True)


class EarlyStoppingTrial(DropoutTrial):
    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"counter": self.counter, "stop": StopAfterValidation(self.context)}


def test_a_stop_requested_by_a_validation_callback_stops_at_once(ckpt_dir: pathlib.Path) -> None:
    context = run_trial(EarlyStoppingTrial, ckpt_dir, [20], config=make_config(min_validation_period={"batches": 3}))
    assert [v["steps_completed"] for v in context.train.validation_history] == [3]
    assert [c["steps_completed"] for c in context.checkpoint.reported] == [3]  # no batch trained after it
    assert context.train.early_exit_reason == "USER_REQUESTED_STOP"
    assert context.searcher.completed_operations == []


def test_callbacks_must_be_a_dict_of_callbacks(ckpt_dir: pathlib.Path) -> None:
    class BadCallbacks(DropoutTrial):
        def build_callbacks(self) -> Any:
            return [_hook_trials.RecordingCallback()]

    from determined import errors

    with pytest.raises(errors.InvalidTrialError, match="must return a dict of name -> det.pytorch.PyTorchCallback"):
        run_trial(BadCallbacks, ckpt_dir, [1])
