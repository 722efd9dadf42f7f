"""Tiny trials for the tests of determined.pytorch (importable by subprocesses: this dir goes on sys.path)."""
from typing import Any, Dict, List

import numpy as np
import torch
from torch import nn

import determined.pytorch as det_torch


def random_dataset(records: int = 20, features: int = 4, seed: int = 0) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(records, features, generator=generator)
    y = (x.sum(dim=1) > 0).long()
    return torch.utils.data.TensorDataset(x, y)


class DropoutTrial(det_torch.PyTorchTrial):
    """New API: MLP with dropout on shuffled random data, an LR scheduler stepped every batch, a stateful callback."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        hidden = context.get_hparams().get("hidden", 8)
        self.model = context.wrap_model(
            nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Dropout(0.5), nn.Linear(hidden, 2))
        )
        self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=0.01))
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=3, gamma=0.9),
            det_torch.LRScheduler.StepMode.STEP_EVERY_BATCH,
        )
        self.counter = CountingCallback()

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"counter": self.counter}

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(8, seed=1), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        # Draws from numpy's and python's global RNG too, restored from checkpoints like torch's.
        noise = float(np.random.rand()) * 1e-3
        self.context.backward(loss * (1 + noise))
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "noise": noise}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        logits = self.model(x)
        return {"val_loss": nn.functional.cross_entropy(logits, y), "accuracy": (logits.argmax(1) == y).float().mean()}


class CountingCallback(det_torch.PyTorchCallback):
    def __init__(self) -> None:
        self.validations_started = 0
        self.validations_ended: List[Dict[str, Any]] = []
        self.restored: Dict[str, Any] = {}

    def on_validation_start(self) -> None:
        self.validations_started += 1

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        self.validations_ended.append(metrics)

    def state_dict(self) -> Dict[str, Any]:
        return {"validations": self.restored.get("validations", 0) + self.validations_started}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.restored = dict(state_dict)


class OldApiTrial(det_torch.PyTorchTrial):
    """0.12 API: build_model / optimizer / create_lr_scheduler; Determined runs backward and the step."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> det_torch.LRScheduler:
        return det_torch.LRScheduler(
            torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5),
            det_torch.LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"clip": det_torch.ClipGradsL2Norm(0.0001)}

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(8, seed=1), batch_size=4)

    def train_batch(self, batch: Any, model: nn.Module, epoch_idx: int, batch_idx: int) -> Any:
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    def evaluate_batch(self, batch: Any, model: nn.Module) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(model(x), y)}
