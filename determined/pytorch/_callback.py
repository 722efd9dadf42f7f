"""PyTorchCallback: hooks into the training loop; the gradient-clipping callbacks; how the controller fires them."""
import inspect
import logging
import warnings
from typing import Any, Dict, Iterator, List, Optional

import torch

from determined import errors

logger = logging.getLogger("determined.pytorch")


class PyTorchCallback:
    """Hooks a trial returns from ``build_callbacks()`` (a dict name -> callback). Every method is optional.

    With several slots every slot runs its own copy of each callback; ``on_checkpoint_save_start`` and
    ``on_checkpoint_write_end`` run on the chief only (rank 0), which writes the checkpoint. A stateful
    callback overrides ``state_dict()`` / ``load_state_dict()``: the state is saved in every checkpoint under
    the callback's name and restored when the trial resumes.
    """

    # -- the trial --------------------------------------------------------------------------------------

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: Optional[str]) -> None:
        """Runs once per run of the trial, before training, validation or loading a checkpoint.

        ``first_batch_idx`` is the batch training starts from (non-zero when the trial resumes), and
        ``checkpoint_uuid`` the checkpoint it will load (its own latest one, or the one it warm starts from),
        or None.
        """

    def on_trial_shutdown(self) -> None:
        """Runs when the trial process stops training, however it stops (done, paused, preempted, or an error
        in the trial's code); not when the process is killed. The trial is not necessarily complete."""

    # -- checkpoints ------------------------------------------------------------------------------------

    def on_checkpoint_load_start(self, checkpoint: Dict[str, Any]) -> None:
        """Runs on every slot when a checkpoint is loaded, with the checkpoint's state dict, before the models,
        optimizers and callbacks are restored from it."""

    def on_checkpoint_save_start(self, checkpoint: Dict[str, Any]) -> None:
        """Runs on the chief before a checkpoint is written, with the state dict that is about to be saved;
        it may add entries or change them (they come back in ``on_checkpoint_load_start``)."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Deprecated since 0.19.1: use ``on_checkpoint_write_end``."""

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        """Runs on the chief after the checkpoint's files are written to ``checkpoint_dir`` and before they are
        uploaded to checkpoint storage; files added there are part of the checkpoint."""

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        """Runs on every slot once the checkpoint ``uuid`` is in checkpoint storage and recorded."""

    def state_dict(self) -> Dict[str, Any]:
        """The callback's state to checkpoint."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the state returned by state_dict()."""

    # -- training ---------------------------------------------------------------------------------------

    def on_training_start(self) -> None:
        """Runs once per run of the trial, after the checkpoint (if any) is loaded and before the first batch."""

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        """Runs before the first batch of every epoch of the training data (also the epoch a resumed trial
        starts in the middle of is not started again)."""

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        """Runs after the last batch of every epoch of the training data."""

    def on_training_workload_end(self, avg_metrics: Dict[str, Any], batch_metrics: List[Dict[str, Any]]) -> None:
        """Runs after each period of training is reported, with the averaged metrics and each batch's metrics."""

    def on_before_optimizer_step(self, parameters: Iterator[torch.nn.Parameter]) -> None:
        """Run after the gradients are computed and before the optimizer steps (e.g. to clip them)."""

    # -- validation -------------------------------------------------------------------------------------

    def on_validation_start(self) -> None:
        """Run before every validation."""

    def on_validation_epoch_start(self) -> None:
        """Run before the first batch of every validation with ``evaluate_batch()``."""

    def on_validation_epoch_end(self, outputs: List[Any]) -> None:
        """Run after the last batch of every validation with ``evaluate_batch()``, with this slot's list of what
        evaluate_batch() returned for each batch."""

    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        """Run after every validation, with the reduced validation metrics (before they are reported)."""

    def on_validation_step_start(self) -> None:
        """Deprecated since 0.12.12: use on_validation_start."""

    def on_validation_step_end(self, metrics: Dict[str, Any]) -> None:
        """Deprecated since 0.12.12: use on_validation_end."""


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


def overrides(callback: PyTorchCallback, hook: str) -> bool:
    """Whether the callback's class defines its own `hook` (rather than PyTorchCallback's no-op)."""
    return getattr(type(callback), hook, None) is not getattr(PyTorchCallback, hook)


class Callbacks:
    """The callbacks of a trial, fired by the controller at their moments."""

    def __init__(self, callbacks: Any, trial_name: str) -> None:
        if not isinstance(callbacks, dict) or not all(isinstance(c, PyTorchCallback) for c in callbacks.values()):
            raise errors.InvalidTrialError(
                f"{trial_name}.build_callbacks() must return a dict of name -> det.pytorch.PyTorchCallback, got "
                f"{callbacks!r}"
            )
        self.by_name: Dict[str, PyTorchCallback] = callbacks
        for name, callback in callbacks.items():
            if overrides(callback, "on_checkpoint_end"):
                warnings.warn(
                    f"callback {name!r}: on_checkpoint_end is deprecated, use on_checkpoint_write_end",
                    FutureWarning, stacklevel=2,
                )
            if overrides(callback, "on_validation_step_start") or overrides(callback, "on_validation_step_end"):
                warnings.warn(
                    f"callback {name!r}: on_validation_step_start/_end are deprecated, use "
                    "on_validation_start/on_validation_end", FutureWarning, stacklevel=2,
                )
        self._epoch_start_takes_index = {
            name: _takes_argument(callback.on_training_epoch_start) for name, callback in callbacks.items()
        }
        for name, takes in self._epoch_start_takes_index.items():
            if not takes:
                warnings.warn(
                    f"callback {name!r}: on_training_epoch_start() without the epoch_idx argument is deprecated; "
                    "define on_training_epoch_start(self, epoch_idx)", FutureWarning, stacklevel=2,
                )

    def values(self) -> List[PyTorchCallback]:
        return list(self.by_name.values())

    def any_overrides(self, hook: str) -> bool:
        return any(overrides(c, hook) for c in self.by_name.values())

    def fire(self, hook: str, *args: Any, **kwargs: Any) -> None:
        """Call `hook` on every callback, in the order build_callbacks() gave them."""
        for callback in self.by_name.values():
            getattr(callback, hook)(*args, **kwargs)

    def training_epoch_start(self, epoch_idx: int) -> None:
        for name, callback in self.by_name.items():
            if self._epoch_start_takes_index[name]:
                callback.on_training_epoch_start(epoch_idx)
            else:
                callback.on_training_epoch_start()  # type: ignore[call-arg]

    def validation_start(self) -> None:
        for callback in self.by_name.values():
            callback.on_validation_start()
            callback.on_validation_step_start()

    def validation_end(self, metrics: Dict[str, Any]) -> None:
        for callback in self.by_name.values():
            callback.on_validation_end(metrics)
            callback.on_validation_step_end(metrics)

    def checkpoint_write_end(self, checkpoint_dir: str) -> None:
        for callback in self.by_name.values():
            callback.on_checkpoint_end(checkpoint_dir)
            callback.on_checkpoint_write_end(checkpoint_dir)

    def state_dicts(self) -> Dict[str, Any]:
        return {name: callback.state_dict() for name, callback in self.by_name.items()}

    def load_state_dicts(self, states: Dict[str, Any]) -> None:
        for name, state in states.items():
            if name not in self.by_name:
                logger.warning(
                    "the checkpoint holds the state of callback %r, which build_callbacks() no longer returns; "
                    "it is ignored", name,
                )
                continue
            self.by_name[name].load_state_dict(state)


def _takes_argument(method: Any) -> bool:
    """Whether a bound method accepts one positional argument."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(0)
    except TypeError:
        return False
    return True
