"""A DeepSpeedTrial of a tiny MLP on generated data (two Gaussian blobs), written as Determined's users did.

Hyperparameters for the tests: `record_dir` (each rank appends the loss of every micro batch to
record_dir/losses-rank<R>.jsonl) and `crash_at` (the chief fails once, at that batch, to be restarted)."""
import json
import pathlib
from typing import Any, Dict

import deepspeed
import torch
from torch import nn

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

DS_CONFIG: Dict[str, Any] = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "Adam", "params": {"lr": 0.05, "torch_adam": True}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.05, "warmup_num_steps": 3}},
    "zero_optimization": {"stage": 1},
    "steps_per_print": 1000,
}


def blobs(records: int, seed: int) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (records,), generator=generator)
    x = torch.randn(records, 8, generator=generator) + (2.0 * y - 1.0).unsqueeze(1)
    return torch.utils.data.TensorDataset(x, y)


class Counter(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.validations = 0

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        self.validations += 1

    def state_dict(self) -> Dict[str, Any]:
        return {"validations": self.validations}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.validations = state_dict["validations"]


class MLPTrial(det_ds.DeepSpeedTrial):
    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        hparams = self.hparams = context.get_hparams()
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2))
        config = det_ds.overwrite_deepspeed_config(DS_CONFIG, hparams.get("overwrite_deepspeed_args", {}))
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        self.engine = context.wrap_model_engine(engine)
        self.correct = context.wrap_reducer(lambda pairs: sum(c for c, _ in pairs) / sum(n for _, n in pairs),
                                            name="accuracy", for_training=False)

    def build_callbacks(self) -> Dict[str, pytorch.PyTorchCallback]:
        return {"counter": Counter()}

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(blobs(96, 0), batch_size=self.context.train_micro_batch_size_per_gpu, shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(blobs(32, 1), batch_size=8)

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = self.context.to_device(next(dataloader_iter))
        loss = nn.functional.cross_entropy(self.engine(x), y)
        self.engine.backward(loss)
        self.engine.step()
        self._record(batch_idx, float(loss))
        return {"loss": loss}

    def _record(self, batch_idx: int, loss: float) -> None:
        if not self.hparams.get("record_dir"):
            return
        record_dir, rank = pathlib.Path(self.hparams["record_dir"]), self.context.distributed.rank
        with open(record_dir / f"losses-rank{rank}.jsonl", "a") as f:
            f.write(json.dumps({"batch": batch_idx, "loss": loss}) + "\n")
        crashed = record_dir / "crashed"
        if batch_idx == self.hparams.get("crash_at") and rank == 0 and not crashed.exists():
            crashed.touch()
            raise RuntimeError(f"the test trial fails once at batch {batch_idx}")

    def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> Dict[str, Any]:
        x, y = self.context.to_device(next(dataloader_iter))
        logits = self.engine(x)
        self.correct.update((int((logits.argmax(1) == y).sum()), len(y)))
        return {"val_loss": nn.functional.cross_entropy(logits, y)}
