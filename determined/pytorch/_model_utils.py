"""Helpers on the user's models."""
import logging

import torch

logger = logging.getLogger("determined.pytorch")


def reset_parameters(model: torch.nn.Module) -> None:
    """Re-initialize every submodule of `model` (itself included) that has a ``reset_parameters()`` method, as
    freshly constructed layers are. Call it before loading pretrained weights, which it would overwrite."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"reset_parameters() takes a torch.nn.Module, got {type(model).__name__}")
    logger.info("resetting the parameters of %s", type(model).__name__)
    for module in model.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
