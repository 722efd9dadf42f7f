"""An MLP on scikit-learn's digits, written with the PyTorchTrial API of Determined 0.13."""
from typing import Any, Dict

import torch
from torch import nn

import determined.pytorch as det_torch
from data import load_datasets

NUM_FEATURES = 64
NUM_CLASSES = 10


def build_mlp(hidden_size: int, dropout: float) -> nn.Module:
    return nn.Sequential(
        nn.Linear(NUM_FEATURES, hidden_size),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden_size, NUM_CLASSES),
    )


class KeepLearningRate(det_torch.PyTorchCallback):
    """Give the optimizer this trial's learning rate after a checkpoint is loaded.

    Loading a checkpoint restores the optimizer's state, learning rate included. A PBT clone starts from its
    parent's checkpoint with a new learning rate, which must win over the parent's.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, learning_rate: float) -> None:
        self.optimizer = optimizer
        self.learning_rate = learning_rate

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate


class DigitsTrial(det_torch.PyTorchTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.train_data, self.validation_data = load_datasets()
        self.model = context.wrap_model(
            build_mlp(context.get_hparam("hidden_size"), context.get_hparam("dropout"))
        )
        self.optimizer = context.wrap_optimizer(
            torch.optim.Adam(self.model.parameters(), lr=context.get_hparam("learning_rate"))
        )
        self.loss_fn = nn.CrossEntropyLoss()

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"keep_learning_rate": KeepLearningRate(self.optimizer, self.context.get_hparam("learning_rate"))}

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(
            self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(self.validation_data, batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: det_torch.TorchData, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        loss = self.loss_fn(logits, labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: det_torch.TorchData) -> Dict[str, Any]:
        features, labels = batch
        logits = self.model(features)
        return {
            "validation_loss": self.loss_fn(logits, labels),
            "validation_accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
