"""LR schedulers step exactly when their StepMode says; epoch_idx / batch_idx are what the trial sees."""
import pathlib
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

from _pytorch_runs import make_config, run_trial
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
        mode = self.mode = StepMode[context.get_hparam("mode")]
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: 0.5**step), mode
        )

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(20), batch_size=4)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(4), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        SEEN.append({"lr": self.scheduler.get_last_lr()[0], "epoch_idx": epoch_idx, "batch_idx": batch_idx,
                     "epoch_start": self.context.is_epoch_start(), "epoch_end": self.context.is_epoch_end()})
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.mode is StepMode.MANUAL_STEP and batch_idx % 3 == 2:
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


class SeqLenLR(torch.optim.lr_scheduler.LambdaLR):
    """A scheduler with a method of its own, as 0.13's rsws_nas example has (its lr scales with a length)."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.seq_len = 1
        super().__init__(optimizer, lambda step: 1.0)

    def set_seq_len(self, seq_len: int) -> None:
        self.seq_len = seq_len


class DeprecatedGettersTrial(det_torch.PyTorchTrial):
    """0.13-era code: keeps what wrap_lr_scheduler returned, and reads the optimizer and model back from the
    context (deprecated getters)."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(4, 2))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.scheduler = context.wrap_lr_scheduler(SeqLenLR(self.optimizer), StepMode.MANUAL_STEP)
        SEEN.append({"same": isinstance(self.scheduler, SeqLenLR)})

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(20), batch_size=4)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(4), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        self.scheduler.set_seq_len(batch_idx + 1)
        optimizer, model = self.context.get_optimizer(), self.context.get_model()
        SEEN.append({"getters": optimizer is self.optimizer and model is self.model,
                     "scheduler": self.context.get_lr_scheduler().scheduler is self.scheduler})
        loss = nn.functional.cross_entropy(model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}


def test_wrap_lr_scheduler_returns_the_users_scheduler_and_the_deprecated_getters_work(tmp_path: pathlib.Path) -> None:
    SEEN.clear()
    run_trial(DeprecatedGettersTrial, tmp_path, [3], make_config())
    assert SEEN[0] == {"same": True}
    assert SEEN[1:] == [{"getters": True, "scheduler": True}] * 3


class FlexiblePrimitives012Trial(det_torch.PyTorchTrial):
    """Determined 0.12's experimental names of the 0.13 calls (_Model, _Optimizer, _LRScheduler, _to_device,
    _backward, _step_optimizer), as its flexible_primitives example writes them."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context._Model(nn.Linear(4, 2))
        self.optimizer = context._Optimizer(torch.optim.SGD(self.model.parameters(), lr=0.5))
        self.scheduler = context._LRScheduler(torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5),
                                              StepMode.STEP_EVERY_BATCH)

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(20), batch_size=4)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(4), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        x = self.context._to_device(x.cpu())
        SEEN.append({"lr": self.scheduler.get_last_lr()[0], "wrapper": isinstance(self.scheduler, det_torch.LRScheduler)})
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context._backward(loss)
        self.context._step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}


def test_the_012_experimental_names_are_the_same_calls(tmp_path: pathlib.Path) -> None:
    SEEN.clear()
    run_trial(FlexiblePrimitives012Trial, tmp_path, [3], make_config())
    assert SEEN == [{"lr": 0.5, "wrapper": True}, {"lr": 0.25, "wrapper": True}, {"lr": 0.125, "wrapper": True}]


class FlexiblePrimitives012WithModelArgTrial(FlexiblePrimitives012Trial):
    """0.12.12's flexible_primitives example: train_batch and evaluate_batch take the model (the 0.12 signature)
    while the trial wraps its own models and steps its optimizer itself; it gets the first wrapped model."""

    def train_batch(self, batch: Any, model: nn.Module, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        assert model is self.model
        return super().train_batch(batch, epoch_idx, batch_idx)

    def evaluate_batch(self, batch: Any, model: nn.Module) -> Dict[str, Any]:
        assert model is self.model
        return super().evaluate_batch(batch)


def test_a_012_trial_taking_the_model_that_wraps_its_own_steps_once_per_batch(tmp_path: pathlib.Path) -> None:
    SEEN.clear()
    run_trial(FlexiblePrimitives012WithModelArgTrial, tmp_path, [3], make_config())
    # it trains as the example does: the model it wrapped comes in, its own backward and step run
    assert [s["lr"] for s in SEEN] == [0.5, 0.25, 0.125]
