"""Mixed precision: experimental.use_amp() (bfloat16 autocast on a CPU), wrap_scaler() with a GradScaler (the
float16 path: here the CPU GradScaler, on a GPU CUDA's), and apex's clear error."""
import pathlib
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

import determined.pytorch as det_torch
from determined import errors
from _pytorch_runs import make_config, run_trial
from _trials import random_dataset

DTYPES: List[torch.dtype] = []
CLIPPED: List[float] = []
SCALES: List[float] = []


class _Base(det_torch.PyTorchTrial):
    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(64), batch_size=8, shuffle=True)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(random_dataset(16, seed=1), batch_size=8)

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))


class UseAmpTrial(_Base):
    """Determined does everything: autocast around the forward pass, loss scaling, scaler steps."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        context.experimental.use_amp()
        self.model = context.wrap_model(_mlp())
        self.model[0].register_forward_hook(lambda module, inputs, output: DTYPES.append(output.dtype))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.2))

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        output = self.model(x)
        loss = nn.functional.cross_entropy(output, y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss, "output_is_float32": float(output.dtype == torch.float32)}


# use_amp() autocasts to bfloat16 on a CPU and to float16 on a GPU (tests/gpu checks its GradScaler there).
AUTOCAST_DTYPE = torch.float16 if torch.cuda.is_available() else torch.bfloat16


def test_use_amp_trains_under_autocast_and_the_loss_drops(ckpt_dir: pathlib.Path) -> None:
    DTYPES.clear()
    context = run_trial(UseAmpTrial, ckpt_dir, [24], config=make_config(scheduling_unit=8))
    losses = [r["metrics"]["loss"] for r in context.train.training_history]
    assert losses[-1] < losses[0] * 0.7, losses
    assert set(DTYPES) == {AUTOCAST_DTYPE}  # the layers ran under autocast
    assert all(r["metrics"]["output_is_float32"] == 1.0 for r in context.train.training_history)


class ScalerTrial(_Base):
    """The trial drives a GradScaler itself, as with torch.cuda.amp on a GPU (on a CPU: float16 autocast with the
    CPU GradScaler): scale, step through the scaler with gradient clipping, update."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.scaler = context.wrap_scaler(self.make_scaler())
        self.model = context.wrap_model(_mlp())
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.2))

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        scaler = self.scaler

        class ScaleAtStart(det_torch.PyTorchCallback):
            def on_training_start(self) -> None:
                SCALES.append(scaler.get_scale())

        return {"scale": ScaleAtStart()}

    def make_scaler(self) -> Any:
        return torch.amp.GradScaler(self.context.device.type, init_scale=1024.0, growth_interval=3)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        with torch.autocast(self.context.device.type, dtype=torch.float16):
            output = self.model(x)
        DTYPES.append(output.dtype)
        loss = nn.functional.cross_entropy(output.float(), y)
        self.context.backward(self.scaler.scale(loss))

        def clip(parameters: Any) -> None:
            CLIPPED.append(max(float(p.grad.abs().max()) for p in parameters))

        self.context.step_optimizer(self.optimizer, clip_grads=clip, scaler=self.scaler)
        self.scaler.update()
        return {"loss": loss}


def test_a_wrapped_grad_scaler_unscales_before_clipping_steps_and_is_checkpointed(ckpt_dir: pathlib.Path) -> None:
    CLIPPED.clear()
    SCALES.clear()
    first = run_trial(ScalerTrial, ckpt_dir, [12], config=make_config(scheduling_unit=4))
    losses = [r["metrics"]["loss"] for r in first.train.training_history]
    assert losses[-1] < losses[0], losses
    assert max(CLIPPED) < 5.0  # unscaled: the scaled gradients are 1024 times larger or more
    uuid = first.checkpoint.reported[-1]["uuid"]
    saved = torch.load(ckpt_dir / uuid / "state_dict.pth", weights_only=False)["scaler_state_dict"]
    assert saved["scale"] > 1024.0  # it grew every 3 steps without an overflow

    run_trial(ScalerTrial, ckpt_dir, [14], config=make_config(scheduling_unit=4), latest_checkpoint=uuid,
              steps_completed=12)
    assert SCALES == [1024.0, saved["scale"]]  # the resumed trial's scaler continues from the checkpoint


class ApexTrial(UseAmpTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(_mlp())
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.2))
        self.model, self.optimizer = context.configure_apex_amp(self.model, self.optimizer, min_loss_scale=1.0)


def test_apex_amp_without_apex_is_a_clear_error(ckpt_dir: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="needs NVIDIA apex, which is not installed.*use_amp"):
        run_trial(ApexTrial, ckpt_dir, [1])


def test_apex_amp_disabled_changes_nothing() -> None:
    model, optimizer = nn.Linear(2, 1), None
    from determined import core

    with core._make_local_context("/nonexistent", [], make_config(), {"global_batch_size": 4}) as core_context:
        context = det_torch.PyTorchTrialContext(core_context, make_config(), {"global_batch_size": 4}, 0)
        assert context.configure_apex_amp(model, optimizer, enabled=False) == (model, optimizer)
        context.wrap_model(model)
        with pytest.raises(errors.InvalidTrialError, match="must come before wrap_model"):
            context.wrap_scaler(torch.amp.GradScaler("cpu"))
        with pytest.raises(errors.InvalidTrialError, match="takes a GradScaler"):
            det_torch.PyTorchTrialContext(core_context, make_config(), {"global_batch_size": 4}, 0).wrap_scaler(object())
