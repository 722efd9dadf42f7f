"""A DeepSpeedTrial of a tiny MLP on generated data, written as Determined 0.26's DeepSpeed Autotune example is:
its DeepSpeed config comes from `dsat.get_ds_config_from_hparams`. Hyperparameters `oom_above` (a micro batch larger
than that) and `oom_stage` (that ZeRO stage) fail as a GPU out of memory does (a RuntimeError), to test how the
search handles failing configs."""
from typing import Any, Dict

import deepspeed
import torch
from torch import nn

from determined.pytorch import DataLoader, dsat
from determined.pytorch.deepspeed import DeepSpeedTrial, DeepSpeedTrialContext


class Blobs(torch.utils.data.Dataset):
    """64 records of two Gaussian blobs, repeated to a length of 10**6 (as the example's random images are)."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.y = torch.randint(0, 2, (64,), generator=generator)
        self.x = torch.randn(64, 8, generator=generator) + (2.0 * self.y - 1.0).unsqueeze(1)

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, idx: int) -> Any:
        return self.x[idx % 64], self.y[idx % 64]


class TinyTrial(DeepSpeedTrial):
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        self.context = context
        self.hparams = context.get_hparams()
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        ds_config = dsat.get_ds_config_from_hparams(self.hparams)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        self.engine = context.wrap_model_engine(engine)

    def train_batch(self, iter_dataloader: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = self.context.to_device(next(iter_dataloader))
        stage = self.engine.zero_optimization_stage()
        if x.shape[0] > self.hparams.get("oom_above", 10**9) or stage == self.hparams.get("oom_stage"):
            raise RuntimeError(f"CUDA out of memory (simulated: micro batch {x.shape[0]}, ZeRO stage {stage})")
        loss = nn.functional.cross_entropy(self.engine(x), y)
        self.engine.backward(loss)
        self.engine.step()
        return {"train_loss": loss}

    def evaluate_batch(self, iter_dataloader: Any, batch_idx: int) -> Dict[str, Any]:
        x, y = self.context.to_device(next(iter_dataloader))
        return {"val_loss": nn.functional.cross_entropy(self.engine(x), y)}

    def build_training_data_loader(self) -> Any:
        return DataLoader(Blobs(), batch_size=self.context.train_micro_batch_size_per_gpu, shuffle=True)

    def build_validation_data_loader(self) -> Any:
        return DataLoader(Blobs(), batch_size=self.context.train_micro_batch_size_per_gpu)
