"""Trials in the style of Determined 0.14-0.38 (no model argument, evaluate_batch with batch_idx, callbacks,
reducers), for the tests of callbacks, reducers and AMP. EVENTS records what ran, in order."""
import os
from typing import Any, Dict, List, Tuple

import torch
from torch import nn

import determined.pytorch as det_torch
from _trials import random_dataset

EVENTS: List[Tuple[Any, ...]] = []


class RecordingCallback(det_torch.PyTorchCallback):
    """Every hook appends (hook, its arguments in a comparable form) to EVENTS."""

    def __init__(self) -> None:
        self.validations = 0
        self.restored: Dict[str, Any] = {}

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: Any) -> None:
        EVENTS.append(("trial_startup", first_batch_idx, checkpoint_uuid is not None))

    def on_trial_shutdown(self) -> None:
        EVENTS.append(("trial_shutdown",))

    def on_checkpoint_load_start(self, checkpoint: Dict[str, Any]) -> None:
        EVENTS.append(("checkpoint_load_start", checkpoint["steps_completed"], checkpoint.get("note")))

    def on_checkpoint_save_start(self, checkpoint: Dict[str, Any]) -> None:
        checkpoint["note"] = f"added by on_checkpoint_save_start at {checkpoint['steps_completed']}"
        EVENTS.append(("checkpoint_save_start", checkpoint["steps_completed"]))

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        EVENTS.append(("checkpoint_write_end", sorted(os.listdir(checkpoint_dir))))

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        EVENTS.append(("checkpoint_upload_end", len(uuid)))

    def on_training_start(self) -> None:
        EVENTS.append(("training_start",))

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        EVENTS.append(("training_epoch_start", epoch_idx))

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        EVENTS.append(("training_epoch_end", epoch_idx))

    def on_training_workload_end(self, avg_metrics: Dict[str, Any], batch_metrics: List[Dict[str, Any]]) -> None:
        EVENTS.append(("training_workload_end", sorted(avg_metrics), len(batch_metrics)))

    def on_validation_start(self) -> None:
        self.validations += 1
        EVENTS.append(("validation_start",))

    def on_validation_epoch_start(self) -> None:
        EVENTS.append(("validation_epoch_start",))

    def on_validation_epoch_end(self, outputs: List[Any]) -> None:
        EVENTS.append(("validation_epoch_end", [sorted(o) for o in outputs]))

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        EVENTS.append(("validation_end", sorted(metrics)))

    def state_dict(self) -> Dict[str, Any]:
        return {"validations": self.restored.get("validations", 0) + self.validations}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.restored = dict(state_dict)
        EVENTS.append(("load_state_dict", dict(state_dict)))


class RecordsReducer(det_torch.MetricReducer):
    """Records per period: per slot the count, across slots the sum."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0

    def update(self, records: int) -> None:
        self.count += records

    def per_slot_reduce(self) -> int:
        return self.count

    def cross_slot_reduce(self, per_slot_metrics: List[int]) -> Dict[str, int]:
        return {"records": sum(per_slot_metrics)}


def label_share(values: List[Tuple[int, int]]) -> float:
    """A function reducer: the share of label 1 over every (ones, records) pair given to update()."""
    return sum(ones for ones, _ in values) / sum(records for _, records in values)


class HookTrial(det_torch.PyTorchTrial):
    """0.38 style: __init__ takes the hparams too, evaluate_batch takes batch_idx, a recording callback, a
    MetricReducer (name=None: a dict) and a reducer function (named)."""

    def __init__(self, context: det_torch.PyTorchTrialContext, hparams: Dict[str, Any]) -> None:
        self.context = context
        self.hparams = hparams
        torch.manual_seed(1)
        self.model = context.wrap_model(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=hparams["lr"]))
        self.records = context.wrap_reducer(RecordsReducer())
        self.ones = context.wrap_reducer(label_share, name="label_share", for_training=False)
        self.callback = RecordingCallback()

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"recorder": self.callback}

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(10, seed=1), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        EVENTS.append(("train_batch", batch_idx, epoch_idx, self.context.is_epoch_start(),
                       self.context.is_epoch_end()))
        x, y = batch
        self.records.update(len(x))
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> Dict[str, Any]:
        EVENTS.append(("evaluate_batch", batch_idx))
        x, y = batch
        self.records.update(len(x))
        self.ones.update((int(y.sum()), len(y)))
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}
