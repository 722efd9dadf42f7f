"""LR schedulers step exactly when their StepMode says; epoch_idx / batch_idx are what the trial sees."""
import pathlib
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

from conftest import make_config, run_trial
import _trials
import determined.pytorch as det_torch

StepMode = det_torch.LRScheduler.StepMode
SEEN: List[Dict[str, Any]] = []


class SchedulerTrial(det_torch.PyTorchTrial):
    """20 records in batches of 4: epochs of 5 batches. Records the lr and indices each batch sees."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(4, 2))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=1.0))
        mode = StepMode[context.get_hparam("mode")]
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: 0.5**step), mode
        )

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(20), batch_size=4)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(4), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        SEEN.append({"lr": self.scheduler.get_lr()[0], "epoch_idx": epoch_idx, "batch_idx": batch_idx,
                     "epoch_start": self.context.is_epoch_start(), "epoch_end": self.context.is_epoch_end()})
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.scheduler.step_mode is StepMode.MANUAL_STEP and batch_idx % 3 == 2:
            self.scheduler.step()
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        return {"val_loss": torch.tensor(1.0)}


def _run(tmp_path: pathlib.Path, mode: str, batches: int = 12, **config: Any) -> List[Dict[str, Any]]:
    SEEN.clear()
    cfg = make_config(hyperparameters={"global_batch_size": 4, "mode": mode}, **config)
    run_trial(SchedulerTrial, tmp_path, [batches], cfg)
    return list(SEEN)


def _steps_before_each_batch(seen: List[Dict[str, Any]]) -> List[int]:
    return [round(-torch.log2(torch.tensor(s["lr"])).item()) for s in seen]


def test_step_every_batch(tmp_path: pathlib.Path) -> None:
    assert _steps_before_each_batch(_run(tmp_path, "STEP_EVERY_BATCH")) == list(range(12))


def test_step_every_epoch(tmp_path: pathlib.Path) -> None:
    seen = _run(tmp_path, "STEP_EVERY_EPOCH")
    # Stepped after batches 4 and 9, the last of the first two epochs.
    assert _steps_before_each_batch(seen) == [0] * 5 + [1] * 5 + [2] * 2
    assert [s["epoch_idx"] for s in seen] == [0] * 5 + [1] * 5 + [2] * 2
    assert [s["batch_idx"] for s in seen] == list(range(12))
    assert [i for i, s in enumerate(seen) if s["epoch_start"]] == [0, 5, 10]
    assert [i for i, s in enumerate(seen) if s["epoch_end"]] == [4, 9]


def test_manual_step_is_never_stepped_by_determined(tmp_path: pathlib.Path) -> None:
    # The trial steps after batches 2, 5, 8 (and 11, after the last lr was seen).
    assert _steps_before_each_batch(_run(tmp_path, "MANUAL_STEP")) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_scheduler_steps_only_on_update_batches_with_aggregation(tmp_path: pathlib.Path) -> None:
    every_batch = _run(tmp_path / "batch", "STEP_EVERY_BATCH", optimizations={"aggregation_frequency": 2})
    assert _steps_before_each_batch(every_batch) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    every_epoch = _run(tmp_path / "epoch", "STEP_EVERY_EPOCH", optimizations={"aggregation_frequency": 2})
    # Of the update batches 1, 3, 5, 7, 9, 11, (batch_idx + 1) % 5 < 2 holds for 5 (6 % 5 = 1) and 9 (10 % 5 = 0).
    assert _steps_before_each_batch(every_epoch) == [0] * 6 + [1] * 4 + [2] * 2


def test_scheduler_state_is_checkpointed(tmp_path: pathlib.Path) -> None:
    cfg = make_config(hyperparameters={"global_batch_size": 4, "mode": "STEP_EVERY_BATCH"})
    first = run_trial(SchedulerTrial, tmp_path, [7], cfg)
    uuid = first.checkpoint.reported[-1]["uuid"]
    SEEN.clear()
    run_trial(SchedulerTrial, tmp_path, [9], cfg, latest_checkpoint=uuid, steps_completed=7)
    assert _steps_before_each_batch(SEEN) == [7, 8]
    assert [s["batch_idx"] for s in SEEN] == [7, 8]


def test_invalid_step_mode_is_a_clear_error() -> None:
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    with pytest.raises(Exception, match="STEP_EVERY_EPOCH, STEP_EVERY_BATCH, STEP_EVERY_OPTIMIZER_STEP or MANUAL_STEP"):
        det_torch.LRScheduler(torch.optim.lr_scheduler.StepLR(optimizer, 1), "every batch")  # type: ignore[arg-type]
