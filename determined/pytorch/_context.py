"""PyTorchTrialContext: what a PyTorchTrial uses to register its models, optimizers and schedulers."""
import logging
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch

from determined import errors
from determined._trial_context import TrialContext
from determined.pytorch import _distributed
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._lr_scheduler import LRScheduler, LRSchedulerStepMode
from determined.pytorch._to_device import to_device

logger = logging.getLogger("determined.pytorch")


def _pick_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
    return torch.device("cpu")


class PyTorchTrialContext(TrialContext):
    """The context of a PyTorchTrial: hyperparameters and config (from TrialContext), the device, and the
    models, optimizers and LR schedulers the trial wraps so that Determined can move, step and checkpoint them.
    """

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        super().__init__(core_context, config, hparams, trial_seed)
        _distributed.check_global_batch_size(hparams, self.distributed.size)
        self.device: torch.device = _pick_device(self.distributed.local_rank)
        self.models: List[torch.nn.Module] = []
        self.optimizers: List[torch.optim.Optimizer] = []
        self.lr_schedulers: List[LRScheduler] = []
        optimizations = config.get("optimizations") or {}
        self._aggregation_frequency = int(optimizations.get("aggregation_frequency", 1) or 1)
        if self._aggregation_frequency < 1:
            raise errors.DeterminedError(
                f"optimizations.aggregation_frequency must be >= 1, got {self._aggregation_frequency}"
            )
        self._average_aggregated_gradients = bool(optimizations.get("average_aggregated_gradients", True))
        # Set by the controller before each batch (and from build_callbacks for the old API).
        self._current_batch_idx = 0
        self._epoch_len: Optional[int] = None
        self._callbacks: Dict[str, PyTorchCallback] = {}

    # -- wrapping ------------------------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move the model to the trial's device and register it for checkpoints; returns the model.

        With several slots the model comes back wrapped in DistributedDataParallel (its gradients are
        averaged across slots during backward; attributes of your model are still reachable through it).
        Checkpoints hold the state of your model itself, the same with any number of slots.
        """
        if not isinstance(model, torch.nn.Module):
            raise errors.InvalidTrialError(f"wrap_model() takes a torch.nn.Module, got {type(model).__name__}")
        model = model.to(self.device)
        if self.distributed.size > 1:
            model = _distributed.wrap_ddp(model, self.device)
        self.models.append(model)
        return model

    def wrap_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Register the optimizer for checkpoints and for step_optimizer(); returns it.

        Create it from the parameters of a model returned by wrap_model(), so they live on the trial's device.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise errors.InvalidTrialError(
                f"wrap_optimizer() takes a torch.optim.Optimizer, got {type(optimizer).__name__}"
            )
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(self, lr_scheduler: Any, step_mode: LRSchedulerStepMode) -> LRScheduler:
        """Register a torch LR scheduler, stepped as `step_mode` says and checkpointed; returns the wrapper."""
        if isinstance(lr_scheduler, LRScheduler):
            wrapped = lr_scheduler
        else:
            wrapped = LRScheduler(lr_scheduler, step_mode)
        self.lr_schedulers.append(wrapped)
        return wrapped

    # -- training ------------------------------------------------------------------------------------

    def to_device(self, data: Any) -> Any:
        """`data` (tensors, numpy arrays, and tuples/lists/dicts of them) moved to the trial's device."""
        return to_device(data, self.device)

    def backward(
        self,
        loss: torch.Tensor,
        gradient: Optional[torch.Tensor] = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Compute the gradients of `loss` (call it in train_batch instead of loss.backward()).

        With optimizations.aggregation_frequency k > 1 the gradients of k batches accumulate before the
        optimizer steps; with several slots they are exchanged between slots only on the k-th batch.
        """
        if not isinstance(loss, torch.Tensor):
            raise errors.InvalidTrialError(f"context.backward() takes the loss tensor, got {type(loss).__name__}")
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def is_update_batch(self) -> bool:
        """Whether the optimizers step after the current batch (every batch unless gradients are aggregated)."""
        return (self._current_batch_idx + 1) % self._aggregation_frequency == 0

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Optional[Callable[[Iterator[torch.nn.Parameter]], None]] = None,
        auto_zero_grads: bool = True,
    ) -> None:
        """Step `optimizer` (wrapped with wrap_optimizer) and zero its gradients.

        `clip_grads(parameters)` runs before the step, then the callbacks' on_before_optimizer_step. With
        aggregation_frequency k > 1 this steps only every k-th batch, on the gradients summed (or averaged,
        with average_aggregated_gradients) over those k batches.
        """
        if not any(optimizer is o for o in self.optimizers):
            raise errors.InvalidTrialError(
                "step_optimizer() got an optimizer that was not wrapped: create it with "
                "optimizer = context.wrap_optimizer(torch.optim....(model.parameters(), ...)) in __init__"
            )
        if not self.is_update_batch():
            return
        if self._aggregation_frequency > 1 and self._average_aggregated_gradients:
            scale = 1.0 / self._aggregation_frequency
            for param in _parameters(optimizer):
                if param.grad is not None:
                    param.grad.mul_(scale)
        if clip_grads is not None:
            clip_grads(_parameters(optimizer))
        for callback in self._callbacks.values():
            callback.on_before_optimizer_step(_parameters(optimizer))
        optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()

    # -- where the trial is --------------------------------------------------------------------------

    def current_train_batch(self) -> int:
        """Index of the batch being trained (per-slot batches since the start of the trial)."""
        return self._current_batch_idx

    def current_train_epoch(self) -> int:
        return self._current_batch_idx // self._epoch_len if self._epoch_len else 0

    def is_epoch_start(self) -> bool:
        """Whether the current batch is the first of an epoch of the training data loader."""
        return bool(self._epoch_len) and self._current_batch_idx % self._epoch_len == 0

    def is_epoch_end(self) -> bool:
        """Whether the current batch is the last of an epoch of the training data loader."""
        return bool(self._epoch_len) and (self._current_batch_idx + 1) % self._epoch_len == 0

    def get_aggregation_frequency(self) -> int:
        return self._aggregation_frequency


def _parameters(optimizer: torch.optim.Optimizer) -> Iterator[torch.nn.Parameter]:
    for group in optimizer.param_groups:
        yield from group["params"]
