"""Trials for the distributed tests (importable by the worker processes: this dir goes on sys.path)."""
import os
import pathlib
import time
from typing import Any, Dict, List

import torch
from torch import nn

import determined.pytorch as det_torch

TRAIN_RECORDS = 64
VALIDATION_RECORDS = 41  # batches of 4: 11 batches, 6 on rank 0 and 5 on rank 1, the last one of 1 record


def regression_data(records: int, seed: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(records, 3, generator=generator)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.25
    return torch.utils.data.TensorDataset(x, y)


class ExactMSE:
    """A custom reducer: per slot the sums of squared errors and records, across slots their ratio."""

    def reset(self) -> None:
        self.total = torch.zeros(2, dtype=torch.float64)

    def accumulate(self, value: torch.Tensor) -> torch.Tensor:
        self.total = self.total + value.to(torch.float64)
        return self.total

    def cross_slot_reduce(self, per_slot: Any) -> float:
        total = sum(per_slot)
        return float(total[0] / total[1])


class LinearTrial(det_torch.PyTorchTrial):
    """Linear regression with plain SGD (no dropout, no randomness in the step): 1 and N slots must agree."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        torch.manual_seed(0)
        self.model = context.wrap_model(nn.Linear(3, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=context.get_hparam("lr")))

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(
            regression_data(TRAIN_RECORDS, 0), batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(regression_data(VALIDATION_RECORDS, 1), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        time.sleep(float(self.context.get_hparams().get("sleep", 0)))
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "rank": float(self.context.distributed.rank)}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        error = self.model(x) - y
        return {
            "mse": torch.stack([(error ** 2).sum(), torch.tensor(float(len(x)))]),
            "val_loss": nn.functional.mse_loss(self.model(x), y),
            "records": len(x),
            "max_abs_error": (self.model(x) - y).abs().max(),
        }

    def evaluation_reducer(self) -> Dict[str, det_torch.Reducer]:
        return {"val_loss": det_torch.Reducer.AVG, "records": det_torch.Reducer.SUM,
                "max_abs_error": det_torch.Reducer.MAX, "mse": ExactMSE()}


class FullDatasetTrial(LinearTrial):
    """Validation with evaluate_full_dataset: runs on the chief only."""

    evaluate_batch = det_torch.PyTorchTrial.evaluate_batch  # type: ignore[assignment]

    def evaluate_full_dataset(self, data_loader: Any) -> Dict[str, Any]:
        records = sum(len(x) for x, _ in data_loader)
        return {"val_loss": 0.0, "records": records, "rank": self.context.distributed.rank}


class StopOnRankOneTrial(LinearTrial):
    """Rank 1 alone asks to stop after batch 5: every rank must stop there (no rank left waiting)."""

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        metrics = super().train_batch(batch, epoch_idx, batch_idx)
        if batch_idx == 4 and self.context.distributed.rank == 1:
            self.context.set_stop_requested(True)
        return metrics


def in_batch_order(global_batch_indices: List[int]) -> float:
    """1.0 when the values of every slot come back interleaved in the order of the validation's batches."""
    return float(global_batch_indices == list(range(len(global_batch_indices))))


class UploadRecorder(det_torch.PyTorchCallback):
    """Writes every checkpoint uuid it hears to uploads-rank<r>.txt in $DDP_TEST_OUT."""

    def __init__(self, rank: int) -> None:
        self.path = pathlib.Path(os.environ["DDP_TEST_OUT"]) / f"uploads-rank{rank}.txt"

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        with open(self.path, "a") as f:
            f.write(uuid + "\n")


class ReducerTrial(LinearTrial):
    """wrap_reducer over two slots (reducer functions for training and for validation; MetricReducers go
    through the same gathering, see tests/pytorch/test_reducers.py), and a callback that must hear every
    checkpoint's uuid on every rank."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        super().__init__(context)
        self.records = context.wrap_reducer(sum, name="records_trained", for_validation=False)
        self.order = context.wrap_reducer(in_batch_order, name="in_batch_order", for_training=False)

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"uploads": UploadRecorder(self.context.distributed.rank)}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        self.records.update(len(batch[0]))
        return super().train_batch(batch, epoch_idx, batch_idx)

    def evaluate_batch(self, batch: Any, batch_idx: int) -> Dict[str, Any]:  # type: ignore[override]
        distributed = self.context.distributed
        self.order.update(batch_idx * distributed.size + distributed.rank)
        return super().evaluate_batch(batch)


class HorovodTrial(LinearTrial):
    """0.20-era trial code: its own collectives through `determined.horovod.hvd` (Horovod's semantics)."""

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        from determined.horovod import hvd

        metrics = super().train_batch(batch, epoch_idx, batch_idx)
        rank = float(hvd.rank())
        # Ranks hold rank+1 rows: allgather concatenates uneven first dimensions in rank order.
        gathered = hvd.allgather(torch.full((hvd.rank() + 1, 2), rank))
        weight = hvd.broadcast(self.model.weight.detach() + rank, root_rank=1)
        metrics.update({
            "hvd_size": float(hvd.size()),
            "hvd_mean_rank": float(hvd.allreduce(torch.tensor([rank]), name="r").item()),
            "hvd_sum_rank": float(hvd.allreduce(torch.tensor([rank]), op=hvd.Sum).item()),
            "hvd_gathered_rows": float(len(gathered)),
            "hvd_gathered_in_rank_order": float(gathered[:, 0].tolist() == [0.0, 1.0, 1.0]),
            "hvd_broadcast_shift": float((weight - self.model.weight.detach()).mean().item()),
            "hvd_objects_in_rank_order": float(hvd.allgather_object({"r": hvd.rank()}) == [{"r": 0}, {"r": 1}]),
        })
        return metrics
