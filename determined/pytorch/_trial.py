"""PyTorchTrial: the class users subclass, in its two generations (0.12 and 0.13)."""
import abc
import inspect
from typing import Any, Dict, Optional, Sequence, Union

import torch

from determined import errors
from determined._trial import Trial
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._data import DataLoader, data_length
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import Reducer

TorchData = Union[Dict[str, torch.Tensor], Sequence[torch.Tensor], torch.Tensor]


class PyTorchTrial(Trial):
    """PyTorch trials are created by subclassing this abstract class.

    Two generations of the API are supported:

    * 0.13 (most code today): ``__init__(context)`` builds the models, optimizers and LR schedulers with
      ``context.wrap_model/wrap_optimizer/wrap_lr_scheduler``; ``train_batch(batch, epoch_idx, batch_idx)``
      calls ``context.backward(loss)`` and ``context.step_optimizer(optimizer)``; ``evaluate_batch(batch)``
      or ``evaluate_full_dataset(data_loader)``.
    * 0.12 (``build_model()``, ``optimizer(model)``, ``create_lr_scheduler(optimizer)``,
      ``train_batch(batch, model, epoch_idx, batch_idx)`` returning the loss, ``evaluate_batch(batch, model)``
      or ``evaluate_full_dataset(data_loader, model)``): Determined runs backward and the optimizer step.
    """

    trial_context_class = PyTorchTrialContext

    def __init__(self, trial_context: PyTorchTrialContext) -> None:
        self.context = trial_context

    # -- required ------------------------------------------------------------------------------------

    @abc.abstractmethod
    def train_batch(self, batch: TorchData, *args: Any, **kwargs: Any) -> Union[torch.Tensor, Dict[str, Any]]:
        """Train on one batch; return the loss, or a dict with the loss under "loss" and other metrics.

        0.13: ``train_batch(batch, epoch_idx, batch_idx)``; 0.12: ``train_batch(batch, model, epoch_idx,
        batch_idx)``. ``batch_idx`` is the number of batches processed per slot since the start of training.
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> DataLoader:
        """Defines the data loader to use during training. Must return a determined.pytorch.DataLoader."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> DataLoader:
        """Defines the data loader to use during validation. Must return a determined.pytorch.DataLoader."""

    # -- the 0.12 API (used only by trials whose train_batch takes the model) -------------------------

    def build_model(self) -> torch.nn.Module:
        """0.12 API: the model of the trial (an nn.Module), typically depending on its hyperparameters."""
        raise errors.InvalidTrialError(
            f"{type(self).__name__}.train_batch takes the model (0.12 API), so the trial must define build_model() "
            "and optimizer(model); or use the 0.13 API: build models in __init__ with context.wrap_model"
        )

    def optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        """0.12 API: the optimizer to train `model` with, an instance of torch.optim.Optimizer."""
        raise errors.InvalidTrialError(
            f"{type(self).__name__} defines build_model() (0.12 API) but not optimizer(model): add it, returning "
            "a torch.optim.Optimizer over model.parameters()"
        )

    def create_lr_scheduler(self, optimizer: torch.optim.Optimizer) -> Optional[LRScheduler]:
        """0.12 API: a det.pytorch.LRScheduler wrapping a torch scheduler of `optimizer`, or None (the default)."""
        return None

    # -- optional ------------------------------------------------------------------------------------

    def evaluate_batch(self, batch: TorchData, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """Calculate evaluation metrics for a batch and return them as a dict of metric name -> value.

        Override exactly one of evaluate_batch() (preferred: it can be parallelized across slots) and
        evaluate_full_dataset(). The per-batch values are reduced with evaluation_reducer(). Signatures:
        ``evaluate_batch(batch)``; ``evaluate_batch(batch, batch_idx)`` (0.14.5+: the index of the batch within
        this validation, on this slot); 0.12: ``evaluate_batch(batch, model)``. Metrics of reducers wrapped with
        ``context.wrap_reducer`` are added; with only those, return an empty dict.
        """
        raise errors.InvalidTrialError(_evaluate_error(type(self)))

    def evaluation_reducer(self) -> Union[Reducer, Dict[str, Reducer]]:
        """A reducer for all evaluation metrics, or a dict metric name -> reducer. Defaults to Reducer.AVG."""
        return Reducer.AVG

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader, *args: Any) -> Dict[str, Any]:
        """Calculate validation metrics on the entire validation dataset, already reduced (one value per metric).

        Runs on a single device (the chief) even with several slots. 0.12 signature:
        ``evaluate_full_dataset(data_loader, model)``.
        """
        raise errors.InvalidTrialError(_evaluate_error(type(self)))

    def build_callbacks(self) -> Dict[str, PyTorchCallback]:
        """Callbacks by name: hooks into training and validation, checkpointed under their name."""
        return {}

    def get_batch_length(self, batch: Any) -> int:
        """The number of records in a batch (for the records/s the trial logs). The default finds the first
        tensor or array in the batch and takes its length; override it for batches it cannot measure."""
        return data_length(batch)


def _evaluate_error(trial_class: type) -> str:
    return (
        f"{trial_class.__name__} must override exactly one of evaluate_batch() and evaluate_full_dataset() "
        "to compute validation metrics"
    )


def _overrides(trial_class: type, name: str) -> bool:
    return getattr(trial_class, name) is not getattr(PyTorchTrial, name)


def check_evaluate_methods(trial_class: type) -> str:
    """Which evaluate method the trial overrides ("evaluate_batch" or "evaluate_full_dataset"); an error
    naming the class when it overrides both or neither."""
    batch, full = _overrides(trial_class, "evaluate_batch"), _overrides(trial_class, "evaluate_full_dataset")
    if batch and full:
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} overrides both evaluate_batch() and evaluate_full_dataset(); "
            "override exactly one of them (evaluate_batch is preferred: it can run on every slot)"
        )
    if not batch and not full:
        raise errors.InvalidTrialError(_evaluate_error(trial_class))
    return "evaluate_batch" if batch else "evaluate_full_dataset"


def _positional_params(method: Any) -> Sequence[inspect.Parameter]:
    params = list(inspect.signature(method).parameters.values())
    return [p for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def builds_its_model(trial_class: type) -> bool:
    """True when the trial defines build_model(), optimizer() or create_lr_scheduler() (the 0.12 API): Determined
    wraps what they return and runs backward and the optimizer step after its train_batch (0.12.x's rule). A
    trial whose train_batch takes the model but that wraps its own models in __init__ (0.12's experimental
    "flexible primitives") gets the first model and steps its optimizers itself."""
    return any(_overrides(trial_class, name) for name in ("build_model", "optimizer", "create_lr_scheduler"))


def uses_old_api(trial_class: type) -> bool:
    """True for a 0.12-style trial: its train_batch takes the model, or it defines build_model()."""
    params = _positional_params(trial_class.train_batch)
    if any(p.name == "model" for p in params) or len(params) >= 4:
        return True
    return _overrides(trial_class, "build_model")


def evaluate_argument(trial_class: type, method_name: str) -> Optional[str]:
    """What the trial's evaluate method takes after the batch (or data loader): "model" (the 0.12 API),
    "batch_idx" (evaluate_batch of 0.14.5+), or None."""
    params = _positional_params(getattr(trial_class, method_name))
    if len(params) < 2:
        return None
    name = params[1].name
    if name == "model":
        return "model"
    if method_name == "evaluate_batch" and (name == "batch_idx" or not uses_old_api(trial_class)):
        return "batch_idx"
    return "model"
