"""The digits MLP of model_def.py written with the PyTorchTrial API of Determined 0.12: Determined builds
the model and optimizer from build_model() / optimizer(), and runs backward and the optimizer step."""
from typing import Any, Dict

import torch
from torch import nn

import determined.pytorch as det_torch
from data import load_datasets
from model_def import build_mlp


class DigitsTrial(det_torch.PyTorchTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.train_data, self.validation_data = load_datasets()
        self.loss_fn = nn.CrossEntropyLoss()

    def build_model(self) -> nn.Module:
        return build_mlp(self.context.get_hparam("hidden_size"), self.context.get_hparam("dropout"))

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.context.get_hparam("learning_rate"))

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(
            self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(self.validation_data, batch_size=self.context.get_per_slot_batch_size())

    def train_batch(
        self, batch: det_torch.TorchData, model: nn.Module, epoch_idx: int, batch_idx: int
    ) -> Dict[str, Any]:
        features, labels = batch
        return {"loss": self.loss_fn(model(features), labels)}

    def evaluate_batch(self, batch: det_torch.TorchData, model: nn.Module) -> Dict[str, Any]:
        features, labels = batch
        logits = model(features)
        return {
            "validation_loss": self.loss_fn(logits, labels),
            "validation_accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
