"""A small, fast PyTorchTrial for the Ray resource manager's tests: it logs every batch it trains."""
import os
import time
from typing import Any, Dict

import torch
from torch import nn

import determined.pytorch as det_torch


def _data(records: int, seed: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(records, 3, generator=generator)
    return torch.utils.data.TensorDataset(x, x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.25)


class RayTestTrial(det_torch.PyTorchTrial):
    """Linear regression; `sleep` seconds per batch (`slow_sleep` on the node `slow_node`, when given); prints
    `[det-test] batch N` (N counts from 1)."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        torch.manual_seed(0)
        self.model = context.wrap_model(nn.Linear(3, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=context.get_hparam("lr")))
        distributed = context.distributed
        backend = torch.distributed.get_backend() if torch.distributed.is_initialized() else "none"
        print(f"[det-test] rank {distributed.rank} of {distributed.size} on node {os.environ.get('DET_RAY_NODE_ID')} "
              f"cross_rank {distributed.cross_rank} of {distributed.cross_size} backend {backend}", flush=True)

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_data(256, 0), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_data(32, 1), batch_size=8)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        hparams = self.context.get_hparams()
        slow = hparams.get("slow_node") and os.environ.get("DET_RAY_NODE_ID") == hparams.get("slow_node")
        time.sleep(float(hparams["slow_sleep"] if slow else hparams["sleep"]))  # slower on `slow_node`, if given
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        if self.context.distributed.rank == 0:
            print(f"[det-test] batch {batch_idx + 1}", flush=True)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.mse_loss(self.model(x), y)}
