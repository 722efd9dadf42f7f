"""LightningAdapter: a PyTorchTrial whose train_batch / evaluate_batch / optimizers / hooks come from a LightningModule
(pytorch-lightning 1.5 to 1.9). It uses no Lightning Trainer: the trial's own loop trains, validates and checkpoints,
so pause, resume, searches and several slots work as for any PyTorchTrial."""
import contextlib
import inspect
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import pytorch_lightning as pl
import torch

from determined import errors
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._lr_scheduler import LRSchedulerStepMode
from determined.pytorch._trial import PyTorchTrial

# Hooks that need Lightning's Trainer or its loop, which the adapter does not reproduce: a module that overrides one
# is refused at once, naming it, rather than silently trained differently.
UNSUPPORTED_HOOKS = (
    "backward", "manual_backward", "optimizer_step", "optimizer_zero_grad", "tbptt_split_batch",
    "training_step_end", "validation_step_end", "transfer_batch_to_device", "on_fit_start", "on_fit_end",
    "on_pretrain_routine_start", "on_pretrain_routine_end", "setup", "teardown",
    "test_step", "test_step_end", "test_epoch_end", "test_dataloader",
)


def _overrides(lm: pl.LightningModule, name: str) -> bool:
    """Whether the module's class defines `name` itself (not LightningModule or its bases)."""
    own = getattr(type(lm), name, None)
    base = getattr(pl.LightningModule, name, None)
    return own is not None and own is not base


def check_compatibility(lm: pl.LightningModule) -> None:
    """Refuse what the adapter cannot run, naming it and what to do instead."""
    if not isinstance(lm, pl.LightningModule):
        raise errors.InvalidTrialError(f"LightningAdapter takes a pytorch_lightning.LightningModule, got {type(lm).__name__}")
    used = [name for name in UNSUPPORTED_HOOKS if _overrides(lm, name)]
    if used:
        raise errors.InvalidTrialError(
            f"LightningAdapter cannot run {type(lm).__name__}: it overrides {', '.join(used)}, which need Lightning's "
            "Trainer; move that logic into training_step/validation_step/configure_optimizers, or write a PyTorchTrial")
    if getattr(lm, "_trainer", None) is not None:
        raise errors.InvalidTrialError("LightningAdapter takes a LightningModule not attached to a Lightning Trainer")
    if "hiddens" in inspect.signature(lm.training_step).parameters:
        raise errors.InvalidTrialError("LightningAdapter does not support truncated back-propagation through time "
                                       "(the `hiddens` argument of training_step)")


class LightningAdapter(PyTorchTrial):
    """A PyTorchTrial built from a LightningModule: subclass it, build the module (and a DataModule) in `__init__`,
    call ``super().__init__(context, lightning_module=lm)``, and give the data loaders with
    ``build_training_data_loader`` / ``build_validation_data_loader`` (e.g. from the DataModule's loaders).

    `precision` 16 trains with automatic mixed precision (`amp_backend` "native": torch.cuda.amp; "apex" needs
    NVIDIA apex and uses `amp_level`, default "O2"). Metrics are what training_step / validation_step return
    (a loss tensor, or a dict with "loss") plus what they log with ``self.log`` / ``self.log_dict``; with several
    optimizers, a metric name two of them return gets the prefix ``opt<i>_``.
    """

    def __init__(self, context: PyTorchTrialContext, lightning_module: pl.LightningModule,
                 precision: Union[int, str] = 32, amp_backend: str = "native", amp_level: Optional[str] = None) -> None:
        if str(precision) not in ("16", "32"):
            raise errors.InvalidTrialError(f"LightningAdapter(precision={precision!r}): use 32, or 16 (mixed precision)")
        if amp_backend not in ("native", "apex"):
            raise errors.InvalidTrialError(f"LightningAdapter(amp_backend={amp_backend!r}): use 'native' or 'apex'")
        check_compatibility(lightning_module)
        if context.distributed.size > 1:
            # Lightning's steps call the module's parts directly (self.generator(z)), never the forward of a
            # DistributedDataParallel wrapper, so the gradients would not be exchanged between slots.
            raise errors.InvalidTrialError(
                f"LightningAdapter trains on one slot here, and this trial has {context.distributed.size} "
                "(resources.slots_per_trial); set slots_per_trial: 1, or write a PyTorchTrial for several slots")
        self._context = context
        self._lm = lightning_module
        self._logged: Dict[str, Any] = {}
        self._epoch = 0
        self._step = 0
        if int(precision) == 16 and amp_backend == "native":
            context.experimental.use_amp()
        self._model = context.wrap_model(lightning_module)
        self._optimizers = self._configure_optimizers()
        if int(precision) == 16 and amp_backend == "apex":
            context.configure_apex_amp(context.models, context.optimizers, enabled=True, opt_level=amp_level or "O2")
        self._attach(lightning_module)

    # ------------------------------------------------------------ what a Trainer would give the module

    def _attach(self, lm: pl.LightningModule) -> None:
        """Answer, without a Trainer, what the module asks its Trainer: epoch, step, ranks, optimizers, logging."""
        adapter = self
        rank, local_rank = self._context.distributed.get_rank(), self._context.distributed.get_local_rank()
        faces = {
            "current_epoch": property(lambda _: adapter._epoch),
            "global_step": property(lambda _: adapter._step),
            "global_rank": property(lambda _: rank),
            "local_rank": property(lambda _: local_rank),
        }
        cls = type(lm)
        lm.__class__ = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                                   **faces})

        def optimizers(use_pl_optimizer: bool = True) -> Any:
            return adapter._optimizers[0] if len(adapter._optimizers) == 1 else list(adapter._optimizers)

        def log(name: str, value: Any, *args: Any, **kwargs: Any) -> None:
            adapter._logged[name] = value

        def log_dict(values: Dict[str, Any], *args: Any, **kwargs: Any) -> None:
            adapter._logged.update(values)

        def print_(*args: Any, **kwargs: Any) -> None:
            if rank == 0:
                print(*args, **kwargs)

        lm.optimizers = optimizers  # type: ignore[method-assign]
        lm.log = log  # type: ignore[method-assign]
        lm.log_dict = log_dict  # type: ignore[method-assign]
        lm.print = print_  # type: ignore[method-assign]

    def _configure_optimizers(self) -> List[torch.optim.Optimizer]:
        """The optimizers (wrapped) and LR schedulers (wrapped) of every form configure_optimizers may return."""
        conf = self._lm.configure_optimizers()
        optimizers, schedulers = _optimizers_and_schedulers(conf)
        wrapped = [self._context.wrap_optimizer(opt) for opt in optimizers]
        for sched in schedulers:
            if sched.get("monitor") is not None or isinstance(sched["scheduler"],
                                                              torch.optim.lr_scheduler.ReduceLROnPlateau):
                raise errors.InvalidTrialError(
                    "LightningAdapter cannot step an LR scheduler on a monitored metric (ReduceLROnPlateau, "
                    "`monitor`); step it yourself in a callback, or use a scheduler stepped by epoch or step")
            if not any(sched["scheduler"].optimizer is opt for opt in wrapped):
                raise errors.InvalidTrialError("configure_optimizers returned an LR scheduler whose optimizer it did "
                                               "not return; return the optimizer too")
            mode = (LRSchedulerStepMode.STEP_EVERY_BATCH if sched.get("interval", "epoch") == "step"
                    else LRSchedulerStepMode.STEP_EVERY_EPOCH)
            self._context.wrap_lr_scheduler(sched["scheduler"], mode, frequency=int(sched.get("frequency", 1)))
        return wrapped

    @contextlib.contextmanager
    def _toggled(self, index: int) -> Iterator[None]:
        """With several optimizers, only the current one's parameters get gradients (Lightning's toggle_optimizer)."""
        if len(self._optimizers) == 1:
            yield
            return
        mine = {id(p) for g in self._optimizers[index].param_groups for p in g["params"]}
        saved: List[Tuple[torch.nn.Parameter, bool]] = []
        for i, opt in enumerate(self._optimizers):
            if i == index:
                continue
            for group in opt.param_groups:
                for p in group["params"]:
                    if id(p) not in mine:
                        saved.append((p, p.requires_grad))
                        p.requires_grad = False
        try:
            yield
        finally:
            for p, flag in saved:
                p.requires_grad = flag

    # ------------------------------------------------------------ PyTorchTrial

    def build_callbacks(self) -> Dict[str, PyTorchCallback]:
        """The callback that calls the module's epoch and checkpoint hooks; merge it into your own callbacks
        (``{**super().build_callbacks(), ...}``) when you override this."""
        return {"_lightning_module": _LightningHooks(self)}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        lm, context = self._lm, self._context
        self._epoch, self._step = epoch_idx, batch_idx
        self._logged = {}
        if lm.on_train_batch_start(batch, batch_idx) == -1:
            return {}
        per_optimizer: List[Dict[str, Any]] = []
        for index, opt in enumerate(self._optimizers):
            with self._toggled(index):
                args: List[Any] = [batch, batch_idx]
                if len(self._optimizers) > 1:
                    if "optimizer_idx" not in inspect.signature(lm.training_step).parameters:
                        raise errors.InvalidTrialError(
                            f"{type(lm).__name__} has {len(self._optimizers)} optimizers, so its training_step takes "
                            "an optimizer_idx argument: training_step(self, batch, batch_idx, optimizer_idx)")
                    args.append(index)
                out = lm.training_step(*args)
                if out is None:
                    continue
                metrics = dict(out) if isinstance(out, dict) else {"loss": out}
                if "loss" not in metrics:
                    raise errors.InvalidTrialError("training_step returned a dict without 'loss'; return the loss "
                                                   "tensor, or a dict with it under 'loss'")
                context.backward(metrics["loss"])
                lm.on_after_backward()
                context.step_optimizer(opt, auto_zero_grads=False)
                lm.on_before_zero_grad(opt)
                opt.zero_grad()
            per_optimizer.append(metrics)
        lm.on_train_batch_end(per_optimizer[0] if len(per_optimizer) == 1 else per_optimizer, batch, batch_idx)
        return {**_merge(per_optimizer), **_scalars(self._logged)}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> Dict[str, Any]:
        lm = self._lm
        self._logged = {}
        lm.on_validation_batch_start(batch, batch_idx, 0)
        out = lm.validation_step(batch, batch_idx)
        lm.on_validation_batch_end(out, batch, batch_idx, 0)
        metrics = {} if out is None else dict(out) if isinstance(out, dict) else {"loss": out}
        return {**metrics, **_scalars(self._logged)}


class _LightningHooks(PyTorchCallback):
    """The module's hooks at the trial loop's epochs, validations and checkpoints."""

    def __init__(self, adapter: LightningAdapter) -> None:
        self.adapter = adapter

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        self.adapter._epoch = epoch_idx
        self.adapter._lm.on_train_epoch_start()

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.adapter._lm.on_train_epoch_end()

    def on_validation_epoch_start(self) -> None:
        self.adapter._lm.on_validation_epoch_start()

    def on_validation_epoch_end(self, outputs: List[Any]) -> None:
        lm = self.adapter._lm
        lm.on_validation_epoch_end()
        if _overrides(lm, "validation_epoch_end"):
            lm.validation_epoch_end(outputs)

    def on_checkpoint_save_start(self, checkpoint: Dict[str, Any]) -> None:
        self.adapter._lm.on_save_checkpoint(checkpoint)

    def on_checkpoint_load_start(self, checkpoint: Dict[str, Any]) -> None:
        self.adapter._lm.on_load_checkpoint(checkpoint)


def _optimizers_and_schedulers(conf: Any) -> Tuple[List[torch.optim.Optimizer], List[Dict[str, Any]]]:
    """configure_optimizers' forms: an optimizer; a list/tuple of them; ([optimizers], [schedulers]); a dict with
    "optimizer" and an optional "lr_scheduler" (a scheduler or a dict with "scheduler", "interval", "frequency");
    a list/tuple of such dicts. Schedulers come back as dicts."""
    def as_dict(sched: Any) -> Dict[str, Any]:
        return dict(sched) if isinstance(sched, dict) else {"scheduler": sched}

    if isinstance(conf, torch.optim.Optimizer):
        return [conf], []
    if isinstance(conf, dict):
        return [conf["optimizer"]], ([as_dict(conf["lr_scheduler"])] if conf.get("lr_scheduler") is not None else [])
    if isinstance(conf, (list, tuple)):
        if len(conf) == 2 and isinstance(conf[0], (list, tuple)):
            return list(conf[0]), [as_dict(s) for s in (conf[1] or [])]
        if all(isinstance(c, dict) for c in conf):
            optimizers, schedulers = [], []
            for c in conf:
                opts, scheds = _optimizers_and_schedulers(c)
                optimizers += opts
                schedulers += scheds
            return optimizers, schedulers
        if all(isinstance(c, torch.optim.Optimizer) for c in conf):
            return list(conf), []
    raise errors.InvalidTrialError(
        f"configure_optimizers returned {type(conf).__name__}; return an optimizer, a list of optimizers, "
        "([optimizers], [schedulers]), or a dict {'optimizer': ..., 'lr_scheduler': ...}")


def _merge(per_optimizer: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One dict of metrics; a name two optimizers' steps both return gets the prefix opt<i>_."""
    counts: Dict[str, int] = {}
    for metrics in per_optimizer:
        for name in metrics:
            counts[name] = counts.get(name, 0) + 1
    out: Dict[str, Any] = {}
    for index, metrics in enumerate(per_optimizer):
        for name, value in metrics.items():
            out[f"opt{index}_{name}" if counts[name] > 1 else name] = value
    return out


def _scalars(logged: Dict[str, Any]) -> Dict[str, Any]:
    """What the module logged, as metrics: numbers and one-element tensors (detached)."""
    out: Dict[str, Any] = {}
    for name, value in logged.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            out[name] = value.detach()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out
