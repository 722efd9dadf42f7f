"""PyTorchTrialContext: what a PyTorchTrial uses to register its models, optimizers, schedulers and reducers."""
import logging
import pathlib
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch

from determined import errors
from determined._trial_context import TrialContext
from determined.core._distributed import check_global_batch_size
from determined.pytorch import _amp, _distributed
from determined.pytorch._callback import PyTorchCallback, overrides
from determined.pytorch._lr_scheduler import LRScheduler, LRSchedulerStepMode
from determined.pytorch._metric_reducer import MetricReducer, ReducerRegistry
from determined.pytorch._to_device import to_device

logger = logging.getLogger("determined.pytorch")


def _pick_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
    return torch.device("cpu")


class PyTorchExperimentalContext:
    """`context.experimental`: opt-in behaviours of the PyTorchTrial loop."""

    def __init__(self, parent: "PyTorchTrialContext") -> None:
        self._parent = parent
        self._auto_amp = False
        self._data_repro_checks_disabled = False
        self._auto_to_device = True

    def use_amp(self) -> None:
        """Automatic mixed precision, all done by Determined: call it in ``__init__`` before ``wrap_model``.

        Every wrapped model's forward pass runs under autocast (float16 on a GPU, bfloat16 on a CPU), the loss
        is scaled before ``backward`` and unscaled before gradient clipping, and the optimizers step through a
        GradScaler that is updated after every batch and saved in checkpoints. Do not also call wrap_scaler().
        """
        self._parent.wrap_scaler(_amp.default_scaler(self._parent.device))
        self._auto_amp = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow build_training_data_loader()/build_validation_data_loader() to return any torch DataLoader.

        Determined then iterates it as it is: it no longer skips the batches already trained when the trial
        resumes, nor shards it between slots (use ``context.get_initial_batch()`` and
        ``determined.pytorch.samplers`` for that).
        """
        self._data_repro_checks_disabled = True
        logger.info("dataset reproducibility checks are disabled: the data loaders are iterated as they are")

    def disable_auto_to_device(self) -> None:
        """Stop moving every batch to the trial's device before train_batch/evaluate_batch (use
        ``context.to_device`` on the parts you want there)."""
        self._auto_to_device = False


class PyTorchTrialContext(TrialContext):
    """The context of a PyTorchTrial: hyperparameters and config (from TrialContext), the device, and the
    models, optimizers and LR schedulers the trial wraps so that Determined can move, step and checkpoint them.
    """

    def __init__(self, core_context: Any, config: Dict[str, Any], hparams: Dict[str, Any], trial_seed: int) -> None:
        super().__init__(core_context, config, hparams, trial_seed)
        check_global_batch_size(hparams, self.distributed.size)
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
        self._optimizer_averaging: Dict[int, bool] = {}
        # Set by the controller before each batch (and from build_callbacks for the old API).
        self._current_batch_idx: Optional[int] = None
        self._epoch_len: Optional[int] = None
        self._callbacks: Dict[str, PyTorchCallback] = {}
        self._reducers = ReducerRegistry()
        self._scaler: Any = None
        self._use_apex = False
        self._apex_loss_ids: Dict[int, int] = {}
        self._tensorboard_writer: Any = None
        self.experimental = PyTorchExperimentalContext(self)

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
        if self.experimental._auto_amp:
            model = _amp.autocast_forward(model, self.device)
        if self.distributed.size > 1:
            model = _distributed.wrap_ddp(model, self.device)
        self.models.append(model)
        return model

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: Optional[bool] = None,
        average_aggregated_gradients: Optional[bool] = None,
    ) -> torch.optim.Optimizer:
        """Register the optimizer for checkpoints and for step_optimizer(); returns it.

        Create it from the parameters of a model returned by wrap_model(), so they live on the trial's device.
        `average_aggregated_gradients` overrides the config's optimizations.average_aggregated_gradients for
        this optimizer. `backward_passes_per_step` and `fp16_compression` were Horovod's; gradients are
        exchanged by DistributedDataParallel here, and aggregation over batches is
        optimizations.aggregation_frequency.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise errors.InvalidTrialError(
                f"wrap_optimizer() takes a torch.optim.Optimizer, got {type(optimizer).__name__}"
            )
        if backward_passes_per_step != 1:
            raise errors.InvalidTrialError(
                f"wrap_optimizer(backward_passes_per_step={backward_passes_per_step}) is Horovod's way to sum "
                "gradients over several backward passes; set optimizations.aggregation_frequency in the experiment "
                "config instead"
            )
        if fp16_compression:
            logger.info("wrap_optimizer(fp16_compression=True) has no effect here: gradients are exchanged by "
                        "DistributedDataParallel without compression")
        if average_aggregated_gradients is not None:
            self._optimizer_averaging[id(optimizer)] = bool(average_aggregated_gradients)
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(self, lr_scheduler: Any, step_mode: LRSchedulerStepMode, frequency: int = 1) -> Any:
        """Register a torch LR scheduler, stepped as `step_mode` says (every `frequency` batches, epochs or
        optimizer steps) and checkpointed; returns the scheduler it was given, as Determined did, so that its
        own methods stay reachable (with ``MANUAL_STEP`` you call its ``step()``)."""
        if isinstance(lr_scheduler, LRScheduler):
            wrapped = lr_scheduler
        else:
            wrapped = LRScheduler(lr_scheduler, step_mode, frequency)
        self.lr_schedulers.append(wrapped)
        return lr_scheduler

    def get_model(self) -> torch.nn.Module:
        """The one model of the trial (deprecated in Determined 0.13: keep what ``wrap_model`` returned)."""
        logger.warning("PyTorchTrialContext.get_model is deprecated: use the model wrap_model() returned")
        return self._only("model", self.models)

    def get_optimizer(self) -> torch.optim.Optimizer:
        """The one optimizer of the trial (deprecated in Determined 0.13: keep what ``wrap_optimizer`` returned)."""
        logger.warning("PyTorchTrialContext.get_optimizer is deprecated: use the optimizer wrap_optimizer() returned")
        return self._only("optimizer", self.optimizers)

    def get_lr_scheduler(self) -> Optional[LRScheduler]:
        """The trial's LR scheduler wrapper, or None (deprecated in Determined 0.13)."""
        logger.warning("PyTorchTrialContext.get_lr_scheduler is deprecated: use the scheduler wrap_lr_scheduler() "
                       "returned")
        if len(self.lr_schedulers) > 1:
            raise errors.InvalidTrialError(f"get_lr_scheduler() needs at most one wrapped LR scheduler; this trial "
                                           f"has {len(self.lr_schedulers)}: keep each one wrap_lr_scheduler() returned")
        return self.lr_schedulers[0] if self.lr_schedulers else None

    @staticmethod
    def _only(what: str, registered: List[Any]) -> Any:
        if len(registered) != 1:
            raise errors.InvalidTrialError(
                f"get_{what}() needs exactly one wrapped {what}; this trial has {len(registered)}: call it after "
                f"wrap_{what}(), or keep each {what} wrap_{what}() returned")
        return registered[0]

    def wrap_reducer(
        self,
        reducer: Union[Callable[[List[Any]], Any], MetricReducer],
        name: Optional[str] = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """Register a custom metric that is computed exactly over all slots; returns the reducer to update.

        `reducer` is a function or a ``det.pytorch.MetricReducer``. A function gets, at the end of each training
        period (the batches between two reports) or validation, the flat list of every value passed to
        ``.update(value)`` of the returned object on any slot. A MetricReducer is reset before each period, fed
        by your own method during train_batch()/evaluate_batch(), reduced on each slot (``per_slot_reduce()``)
        and then across slots (``cross_slot_reduce()``). With `name`, the result is the metric of that name;
        with name=None the reducer returns a dict of metrics. The metrics are added to the training
        (`for_training`) and validation (`for_validation`) metrics that are reported.
        """
        return self._reducers.wrap(reducer, name, for_training, for_validation)

    def wrap_scaler(self, scaler: Any) -> Any:
        """Use PyTorch's automatic mixed precision with this GradScaler (e.g. ``torch.cuda.amp.GradScaler()``).

        Call it once, before wrap_model(). Then scale the loss yourself (``context.backward(scaler.scale(loss))``),
        pass the scaler to ``step_optimizer(opt, scaler=scaler)`` (it unscales before clipping gradients and
        steps through the scaler), and call ``scaler.update()`` after stepping, as in plain PyTorch. The
        scaler's state is saved in every checkpoint and restored.
        """
        if self._use_apex:
            raise errors.InvalidTrialError("wrap_scaler(): this trial already uses apex (configure_apex_amp); use one")
        if self._scaler is not None:
            raise errors.InvalidTrialError(
                "wrap_scaler() was already called (or experimental.use_amp(), which wraps a scaler); call it once"
            )
        if self.models:
            raise errors.InvalidTrialError(
                "wrap_scaler() must come before wrap_model(): mixed precision is set up before the models"
            )
        for method in ("scale", "step", "update", "unscale_", "state_dict", "load_state_dict"):
            if not callable(getattr(scaler, method, None)):
                raise errors.InvalidTrialError(
                    f"wrap_scaler() takes a GradScaler (torch.cuda.amp.GradScaler or torch.amp.GradScaler); "
                    f"{type(scaler).__name__} has no {method}()"
                )
        self._scaler = scaler
        return scaler

    def configure_apex_amp(
        self,
        models: Union[torch.nn.Module, List[torch.nn.Module]],
        optimizers: Union[torch.optim.Optimizer, List[torch.optim.Optimizer]],
        enabled: Optional[bool] = True,
        opt_level: Optional[str] = "O1",
        cast_model_type: Optional[torch.dtype] = None,
        patch_torch_functions: Optional[bool] = None,
        keep_batchnorm_fp32: Optional[Union[bool, str]] = None,
        master_weights: Optional[bool] = None,
        loss_scale: Optional[Union[float, str]] = None,
        cast_model_outputs: Optional[torch.dtype] = None,
        num_losses: Optional[int] = 1,
        verbosity: Optional[int] = 1,
        min_loss_scale: Optional[float] = None,
        max_loss_scale: Optional[float] = 2.0**24,
    ) -> Tuple[Any, Any]:
        """Mixed precision with NVIDIA apex (deprecated: prefer torch AMP, ``experimental.use_amp()``).

        Call it after wrap_model() and wrap_optimizer() with those models and optimizers; the arguments are
        those of ``apex.amp.initialize``. Returns (models, optimizers) in the shape they were given. Afterwards
        ``context.backward`` scales the loss with apex and ``step_optimizer`` clips apex's master parameters;
        apex's state is saved in checkpoints. Needs a GPU and apex installed; with enabled=False it does nothing.
        """
        if not enabled:
            return models, optimizers
        _amp.import_apex()
        if self._scaler is not None and getattr(self._scaler, "is_enabled", lambda: True)():
            raise errors.InvalidTrialError("configure_apex_amp(): this trial already uses torch AMP (wrap_scaler); use one")
        if self._use_apex:
            raise errors.InvalidTrialError("configure_apex_amp() was already called; call it once")
        if self.device.type != "cuda":
            raise errors.InvalidTrialError(
                "configure_apex_amp() needs a GPU slot; on a CPU use context.experimental.use_amp() (bfloat16)"
            )
        if self.distributed.size > 1 and (num_losses != 1 or self._aggregation_frequency > 1):
            raise errors.InvalidTrialError(
                "configure_apex_amp() with several slots supports only num_losses=1 and "
                "optimizations.aggregation_frequency 1"
            )
        warnings.warn(
            "configure_apex_amp() is deprecated (NVIDIA apex); use torch AMP: context.experimental.use_amp() or "
            "context.wrap_scaler()", FutureWarning, stacklevel=2,
        )
        from apex import amp

        model_list = models if isinstance(models, list) else [models]
        optimizer_list = optimizers if isinstance(optimizers, list) else [optimizers]
        # apex changes the modules in place; DistributedDataParallel keeps wrapping the same module objects.
        _, new_optimizers = amp.initialize(
            models=[_distributed.unwrap(m) for m in model_list],
            optimizers=optimizer_list,
            enabled=enabled,
            opt_level=opt_level,
            cast_model_type=cast_model_type,
            patch_torch_functions=patch_torch_functions,
            keep_batchnorm_fp32=keep_batchnorm_fp32,
            master_weights=master_weights,
            loss_scale=loss_scale,
            cast_model_outputs=cast_model_outputs,
            num_losses=num_losses,
            min_loss_scale=min_loss_scale,
            max_loss_scale=max_loss_scale,
            verbosity=verbosity if self.distributed.rank == 0 else 0,
        )
        for old, new in zip(optimizer_list, new_optimizers):
            for index, registered in enumerate(self.optimizers):
                if registered is old:
                    self.optimizers[index] = new
        self._use_apex = True
        logger.info("mixed precision with apex, opt_level %s", opt_level)
        new_optimizers = list(new_optimizers)
        return models, (new_optimizers if isinstance(optimizers, list) else new_optimizers[0])

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
        optimizer steps; with several slots they are exchanged between slots only on the k-th batch. With
        ``experimental.use_amp()`` the loss is scaled here; with apex, apex scales it.
        """
        if not isinstance(loss, torch.Tensor):
            raise errors.InvalidTrialError(f"context.backward() takes the loss tensor, got {type(loss).__name__}")
        if self._use_apex:
            loss_id = self._apex_loss_ids.setdefault(id(loss), len(self._apex_loss_ids))
            with _amp.apex_scaled_loss(loss, self.optimizers, loss_id) as scaled:
                scaled.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)
            return
        if self._scaler is not None and self.experimental._auto_amp:
            loss = self._scaler.scale(loss)
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def is_update_batch(self) -> bool:
        """Whether the optimizers step after the current batch (every batch unless gradients are aggregated)."""
        return ((self._current_batch_idx or 0) + 1) % self._aggregation_frequency == 0

    def _should_communicate_and_update(self) -> bool:
        return self.is_update_batch()

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Optional[Callable[[Iterator[torch.nn.Parameter]], None]] = None,
        auto_zero_grads: bool = True,
        scaler: Optional[Any] = None,
    ) -> None:
        """Step `optimizer` (wrapped with wrap_optimizer) and zero its gradients.

        `clip_grads(parameters)` runs before the step, then the callbacks' on_before_optimizer_step. With
        aggregation_frequency k > 1 this steps only every k-th batch, on the gradients summed (or averaged,
        with average_aggregated_gradients) over those k batches. With a GradScaler (`scaler`, or the one of
        ``experimental.use_amp()``) the gradients are unscaled before clipping and the step goes through it.
        """
        if not (self.optimizers and self.optimizers[0] is optimizer) and not any(o is optimizer for o in self.optimizers):
            raise errors.InvalidTrialError(
                "step_optimizer() got an optimizer that was not wrapped: create it with "
                "optimizer = context.wrap_optimizer(torch.optim....(model.parameters(), ...)) in __init__"
            )
        if self._aggregation_frequency > 1 and not auto_zero_grads:
            raise errors.InvalidTrialError(
                "step_optimizer(auto_zero_grads=False) cannot work with optimizations.aggregation_frequency > 1: "
                "Determined zeroes the gradients after the aggregated step"
            )
        if self._aggregation_frequency > 1 and not self.is_update_batch():
            return
        if scaler is None and self.experimental._auto_amp:
            scaler = self._scaler
        if self._aggregation_frequency > 1 and self._optimizer_averaging.get(
            id(optimizer), self._average_aggregated_gradients
        ):
            scale = 1.0 / self._aggregation_frequency
            for param in self._step_parameters(optimizer):
                if param.grad is not None:
                    param.grad.mul_(scale)
        clippers = [c for c in self._callbacks.values() if overrides(c, "on_before_optimizer_step")] \
            if self._callbacks else ()
        if scaler is not None and (clip_grads is not None or clippers):
            _unscale_once(scaler, optimizer)
        if clip_grads is not None:
            clip_grads(self._step_parameters(optimizer))
        for callback in clippers:
            callback.on_before_optimizer_step(self._step_parameters(optimizer))
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad()

    def _step_parameters(self, optimizer: torch.optim.Optimizer) -> Iterator[torch.nn.Parameter]:
        if self._use_apex:
            return _amp.apex_master_params(optimizer)
        return _parameters(optimizer)

    # -- where the trial is --------------------------------------------------------------------------

    def _require_training(self, what: str) -> int:
        if self._current_batch_idx is None:
            raise errors.DeterminedError(
                f"context.{what}() is only meaningful while training (in train_batch or a training callback)"
            )
        return self._current_batch_idx

    def current_train_batch(self) -> int:
        """Index of the batch being trained (per-slot batches since the start of the trial)."""
        return self._require_training("current_train_batch")

    def current_train_epoch(self) -> int:
        """Index of the epoch of the training data the current batch belongs to."""
        batch = self._require_training("current_train_epoch")
        return batch // self._epoch_len if self._epoch_len else 0

    def is_epoch_start(self) -> bool:
        """Whether the current batch is the first of an epoch of the training data loader."""
        batch = self._require_training("is_epoch_start")
        return bool(self._epoch_len) and batch % self._epoch_len == 0

    def is_epoch_end(self) -> bool:
        """Whether the current batch is the last of an epoch of the training data loader."""
        batch = self._require_training("is_epoch_end")
        return bool(self._epoch_len) and (batch + 1) % self._epoch_len == 0

    def get_aggregation_frequency(self) -> int:
        return self._aggregation_frequency

    def get_initial_batch(self) -> int:
        """The batch this run of the trial starts training from (non-zero when it resumes from a checkpoint)."""
        return int(self._core.info.steps_completed)

    # -- TensorBoard ---------------------------------------------------------------------------------

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory of the trial's TensorBoard event files (served by `det tensorboard start` on the chief
        when the master's data dir is on this machine)."""
        return self._core.train.get_tensorboard_path()

    def get_tensorboard_writer(self) -> Any:
        """A ``torch.utils.tensorboard.SummaryWriter`` on the trial's TensorBoard files, created on first use.

        Scalars written with it (``writer.add_scalar(tag, value, batch_idx)``) appear next to the trial's
        metrics in `det tensorboard start`. Needs the tensorboard package.
        """
        if self._tensorboard_writer is None:
            from determined.tensorboard.metric_writers.pytorch import trial_summary_writer

            self._tensorboard_writer = trial_summary_writer(self._core.train._tensorboard)
        return self._tensorboard_writer

    def set_enable_tensorboard_logging(self, enable_tensorboard_logging: bool) -> None:
        """Whether Determined writes the trial's training and validation metrics to its TensorBoard files
        (default True); your own writer's scalars are written either way."""
        if not isinstance(enable_tensorboard_logging, bool):
            raise errors.DeterminedError(
                f"set_enable_tensorboard_logging() takes a bool, got {enable_tensorboard_logging!r}"
            )
        self._core.train._tensorboard.enabled = enable_tensorboard_logging

    def get_enable_tensorboard_logging(self) -> bool:
        return bool(self._core.train._tensorboard.enabled)

    # Determined 0.12.x named the calls above with a leading underscore while they were experimental (its
    # "flexible primitives" examples use them); they are the same calls. 0.12's _LRScheduler returned the wrapper.
    _Model = wrap_model
    _Optimizer = wrap_optimizer
    _to_device = to_device
    _backward = backward
    _step_optimizer = step_optimizer
    _configure_apex_amp = configure_apex_amp

    def _LRScheduler(self, lr_scheduler: Any, step_mode: LRSchedulerStepMode) -> LRScheduler:
        """0.12.x's experimental ``wrap_lr_scheduler``: returns Determined's LRScheduler wrapper."""
        return self.wrap_lr_scheduler(LRScheduler(lr_scheduler, step_mode), step_mode)


def _unscale_once(scaler: Any, optimizer: torch.optim.Optimizer) -> None:
    """Unscale the optimizer's gradients before they are clipped, unless the trial already did."""
    try:
        scaler.unscale_(optimizer)
    except RuntimeError as e:
        if "already been called" not in str(e):
            raise


def _parameters(optimizer: torch.optim.Optimizer) -> Iterator[torch.nn.Parameter]:
    for group in optimizer.param_groups:
        yield from group["params"]
