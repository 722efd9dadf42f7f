"""Mixed precision for PyTorchTrials: torch AMP (a GradScaler, autocast) and NVIDIA apex (0.12-0.26 code).

torch AMP is the supported path: `context.wrap_scaler(scaler)` (the trial scales the loss, steps with
`step_optimizer(opt, scaler=scaler)` and updates the scaler), or `context.experimental.use_amp()` (Determined does
all of it: autocast around every wrapped model's forward, loss scaling, unscaling before gradient clipping, the
scaler's step and update). On a GPU that is float16 with a CUDA GradScaler; on a CPU, where float16 gains nothing,
use_amp() autocasts to bfloat16, which needs no loss scaling. apex is imported only when a trial asks for it.
"""
import contextlib
import functools
import logging
from typing import Any, Iterator

import torch

from determined import errors

logger = logging.getLogger("determined.pytorch")

APEX_MISSING = (
    "context.configure_apex_amp() needs NVIDIA apex, which is not installed here ({reason}). apex is deprecated "
    "(Determined 0.26.3 and later recommend PyTorch's own AMP) and has no wheels for current PyTorch. Use torch AMP "
    "instead: call context.experimental.use_amp() in __init__ before wrap_model(), or, to control it yourself, "
    "self.scaler = context.wrap_scaler(torch.cuda.amp.GradScaler()) before wrap_model(), run the forward pass under "
    "torch.autocast('cuda'), then context.backward(self.scaler.scale(loss)), "
    "context.step_optimizer(opt, scaler=self.scaler) and self.scaler.update()"
)


def import_apex() -> Any:
    """The `apex` module, or a clear error saying how to use torch AMP instead."""
    try:
        import apex  # noqa: F401
        from apex import amp  # noqa: F401
    except ImportError as e:
        raise errors.InvalidTrialError(APEX_MISSING.format(reason=e)) from None
    return apex


def default_scaler(device: torch.device) -> Any:
    """The GradScaler of use_amp(): CUDA's on a GPU; a disabled one on a CPU (bfloat16 needs no scaling)."""
    if device.type == "cuda":
        return torch.amp.GradScaler("cuda")
    return torch.amp.GradScaler("cpu", enabled=False)


def autocast(device: torch.device) -> Any:
    """The autocast context of use_amp() on `device`: float16 on a GPU, bfloat16 on a CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return torch.autocast(device.type, dtype=torch.bfloat16)


def _to_float32(output: Any) -> Any:
    if isinstance(output, torch.Tensor):
        return output.float() if output.is_floating_point() else output
    if isinstance(output, dict):
        return type(output)({k: _to_float32(v) for k, v in output.items()})
    if isinstance(output, (list, tuple)) and not hasattr(output, "_fields"):
        return type(output)(_to_float32(v) for v in output)
    return output


def autocast_forward(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Make `model`'s forward pass run under autocast on `device`, its floating outputs back in float32 (so the
    loss is computed in full precision). The model object stays the same (its `forward` is replaced)."""
    forward = model.forward

    @functools.wraps(forward)
    def forward_in_autocast(*args: Any, **kwargs: Any) -> Any:
        with autocast(device):
            output = forward(*args, **kwargs)
        return _to_float32(output)

    model.forward = forward_in_autocast  # type: ignore[method-assign]
    return model


@contextlib.contextmanager
def apex_scaled_loss(loss: torch.Tensor, optimizers: Any, loss_id: int) -> Iterator[torch.Tensor]:
    """apex's loss scaling around one backward pass."""
    from apex import amp

    with amp.scale_loss(loss, optimizers, loss_id=loss_id) as scaled:
        yield scaled


def apex_master_params(optimizer: torch.optim.Optimizer) -> Iterator[torch.nn.Parameter]:
    from apex import amp

    return iter(amp.master_params(optimizer))


def apex_state_dict() -> Any:
    from apex import amp

    return amp.state_dict()


def apex_load_state_dict(state: Any) -> None:
    from apex import amp

    amp.load_state_dict(state)
