"""PyTorchCallback: hooks into the training loop, and the gradient-clipping callbacks."""
from typing import Any, Dict, Iterator

import torch


class PyTorchCallback:
    """Hooks a trial returns from ``build_callbacks()`` (a dict name -> callback).

    Every method is optional. ``state_dict()`` / ``load_state_dict()`` are saved in and restored from
    every checkpoint under the callback's name.
    """

    def on_before_optimizer_step(self, parameters: Iterator[torch.nn.Parameter]) -> None:
        """Run after the gradients are computed and before the optimizer steps (e.g. to clip them)."""

    def on_validation_start(self) -> None:
        """Run before every validation."""

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        """Run after every validation, with the reduced validation metrics."""

    def on_validation_step_start(self) -> None:
        """Deprecated since 0.12.12: use on_validation_start."""

    def on_validation_step_end(self, metrics: Dict[str, Any]) -> None:
        """Deprecated since 0.12.12: use on_validation_end."""

    def state_dict(self) -> Dict[str, Any]:
        """The callback's state to checkpoint."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the state returned by state_dict()."""


class ClipGradsL2Norm(PyTorchCallback):
    """Clip the gradients so that their global L2 norm is at most `clip_value`."""

    def __init__(self, clip_value: float) -> None:
        self._clip_value = clip_value

    def on_before_optimizer_step(self, parameters: Iterator[torch.nn.Parameter]) -> None:
        torch.nn.utils.clip_grad_norm_(list(parameters), self._clip_value)


class ClipGradsL2Value(PyTorchCallback):
    """Clip every gradient element into [-clip_value, clip_value]."""

    def __init__(self, clip_value: float) -> None:
        self._clip_value = clip_value

    def on_before_optimizer_step(self, parameters: Iterator[torch.nn.Parameter]) -> None:
        torch.nn.utils.clip_grad_value_(list(parameters), self._clip_value)
