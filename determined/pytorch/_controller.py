"""PyTorchTrialController: drives a PyTorchTrial through the searcher operations of a core context."""
import contextlib
import logging
import time
from typing import Any, Dict, Iterator, List, Optional, Type

import numpy as np
import torch

from determined import errors
from determined._trial_loop import BatchLoop
from determined.pytorch import _checkpoint, _distributed, _trial
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._context import PyTorchTrialContext, _pick_device
from determined.pytorch._data import DataLoader
from determined.pytorch._lr_scheduler import LRScheduler, LRSchedulerStepMode
from determined.pytorch._reducer import MetricAccumulator, combine_partials, reducer_for, to_python
from determined.pytorch._to_device import to_device
from determined.pytorch._training_metrics import TrainingMetrics, metrics_of_train_batch

logger = logging.getLogger("determined.pytorch")

# Seconds of training between two checks, by the ranks of a multi-slot trial, of whether to stop.
STOP_CHECK_S = 0.5


def instantiate_trial(trial_class: Type[Any], context: PyTorchTrialContext) -> Any:
    """Build the user's trial; for the 0.12 API also its model, optimizer and LR scheduler (wrapped)."""
    if not isinstance(context, PyTorchTrialContext):
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} got a {type(context).__name__}; a PyTorchTrial needs a PyTorchTrialContext "
            "(leave trial_context_class as it is, or subclass PyTorchTrialContext)"
        )
    trial = trial_class(context)
    if _trial.uses_old_api(trial_class):
        model = context.wrap_model(trial.build_model())
        optimizer = context.wrap_optimizer(trial.optimizer(model))
        scheduler = trial.create_lr_scheduler(optimizer)
        if scheduler is not None:
            if not isinstance(scheduler, LRScheduler):
                raise errors.InvalidTrialError(
                    f"{trial_class.__name__}.create_lr_scheduler() must return a det.pytorch.LRScheduler "
                    f"(or None), got {type(scheduler).__name__}: wrap it, LRScheduler(scheduler, step_mode)"
                )
            context.lr_schedulers.append(scheduler)
    if not context.models or not context.optimizers:
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} registered {len(context.models)} model(s) and {len(context.optimizers)} "
            "optimizer(s): create them in __init__ with self.model = context.wrap_model(...) and "
            "self.opt = context.wrap_optimizer(...)"
        )
    return trial


def _check_loader(loader: Any, trial_name: str, method: str) -> DataLoader:
    if isinstance(loader, DataLoader):
        return loader
    if isinstance(loader, torch.utils.data.DataLoader):
        raise errors.InvalidTrialError(
            f"{trial_name}.{method}() returned a torch.utils.data.DataLoader; return a "
            "determined.pytorch.DataLoader instead (same arguments: det.pytorch.DataLoader(dataset, "
            "batch_size=..., shuffle=...)), so that Determined can resume it at the exact batch"
        )
    raise errors.InvalidTrialError(
        f"{trial_name}.{method}() must return a determined.pytorch.DataLoader, got {type(loader).__name__}"
    )


class PyTorchTrialController(BatchLoop):
    """Trains, validates and checkpoints a PyTorchTrial as the searcher operations of its core context ask.

    For each operation: train batch by batch up to `op.length` batches in total, report training metrics
    every `scheduling_unit` batches, validate when `min_validation_period` is due, checkpoint when
    `min_checkpoint_period` or `checkpoint_policy` says so; at the end of the operation validate,
    checkpoint if anything is unsaved, and report the searcher metric. Preemption is checked after every
    batch: the controller then checkpoints and returns.
    """

    context: PyTorchTrialContext
    _logger = logger

    def __init__(self, trial_class: Type[Any], context: PyTorchTrialContext) -> None:
        super().__init__(trial_class, context)
        name = trial_class.__name__
        self._evaluate_method = _trial.check_evaluate_methods(trial_class)
        self._old_api = _trial.uses_old_api(trial_class)
        self._evaluate_takes_model = _trial.evaluate_takes_model(trial_class, self._evaluate_method)
        self._read_config(context.get_experiment_config())

        self.trial = instantiate_trial(trial_class, context)
        callbacks = self.trial.build_callbacks()
        if not isinstance(callbacks, dict) or not all(isinstance(c, PyTorchCallback) for c in callbacks.values()):
            raise errors.InvalidTrialError(
                f"{name}.build_callbacks() must return a dict of name -> det.pytorch.PyTorchCallback"
            )
        self.callbacks: Dict[str, PyTorchCallback] = callbacks
        context._callbacks = callbacks
        self.training_loader = _check_loader(self.trial.build_training_data_loader(), name, "build_training_data_loader")
        self.validation_loader = _check_loader(
            self.trial.build_validation_data_loader(), name, "build_validation_data_loader"
        )
        self._epoch_len = self._training_epoch_len()
        context._epoch_len = self._epoch_len

        self._rank = context.distributed.rank
        self._size = context.distributed.size
        self._batches_since_report = TrainingMetrics()
        self._train_iterator: Optional[Iterator[Any]] = None
        # When the ranks of a multi-slot trial next agree on stopping (see _ranks_should_stop).
        self._next_stop_check = 0
        self._last_stop_check = (time.monotonic(), 0)

    # -- configuration -------------------------------------------------------------------------------

    def _read_config(self, config: Dict[str, Any]) -> None:
        super()._read_config(config)
        if self._checkpoint_policy not in ("best", "all", "none"):
            raise errors.DeterminedError(
                f"checkpoint_policy must be best, all or none, got {self._checkpoint_policy!r}"
            )

    def _training_epoch_len(self) -> Optional[int]:
        try:
            length = self.training_loader.per_rank_len(self.context.distributed.size)
        except TypeError:
            length = None
        if length is None and any(
            s.step_mode is LRSchedulerStepMode.STEP_EVERY_EPOCH for s in self.context.lr_schedulers
        ):
            raise errors.InvalidTrialError(
                "an LR scheduler steps every epoch, but the training data loader has no length (an "
                "IterableDataset without __len__): use STEP_EVERY_BATCH or MANUAL_STEP, or give the dataset a length"
            )
        return length

    # -- entry point ---------------------------------------------------------------------------------

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        """Seed torch; with several slots, join the trial's torch.distributed process group."""
        torch.manual_seed(trial_seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(trial_seed)
        if distributed is not None and distributed.size > 1:
            _distributed.init_process_group(distributed, _pick_device(distributed.local_rank))

    def run(self) -> None:
        self._restore()
        for model in self.context.models:
            model.train()
        try:
            self._run_operations()
        finally:
            self._train_iterator = None

    def _ranks_should_stop(self) -> bool:
        """The ranks agree on stopping about every STOP_CHECK_S seconds (at least every scheduling_unit
        batches) rather than after every batch: the chief measures the pace of training and tells the
        others after how many batches they check next."""
        if self.steps_completed < self._next_stop_check:
            return False
        now = time.monotonic()
        preempt, interval = False, 1
        if self._rank == 0:
            preempt = self.core.preempt._chief_should_preempt()
            batches = self.steps_completed - self._last_stop_check[1]
            if batches > 0 and now > self._last_stop_check[0]:
                per_batch = (now - self._last_stop_check[0]) / batches
                interval = int(min(self._scheduling_unit, max(1.0, STOP_CHECK_S / per_batch)))
        decisions = self.context.distributed.allgather((preempt, self.context.get_stop_requested(), interval))
        self._last_stop_check = (now, self.steps_completed)
        self._next_stop_check = self.steps_completed + int(decisions[0][2])
        return self._agree_on_stop(decisions[0][0], (requested for _, requested, _ in decisions))

    def _missing_searcher_metric(self, name: str, metrics: Dict[str, Any]) -> str:
        return (
            f"the validation metrics lack the searcher metric {name!r} (searcher.metric); the trial's "
            f"validation returned: {', '.join(sorted(metrics)) or 'no metrics'}. Return {name!r} from "
            f"{self._evaluate_method}() or change searcher.metric"
        )

    # -- training ------------------------------------------------------------------------------------

    def _next_batch(self) -> Any:
        if self._train_iterator is None:
            loader = self.training_loader.get_data_loader(
                repeat=True,
                skip=self.steps_completed,
                num_replicas=self._size,
                rank=self._rank,
                seed=self.context.get_trial_seed(),
            )
            self._train_iterator = iter(loader)
        return next(self._train_iterator)

    def _train_one_batch(self) -> None:
        context = self.context
        batch_idx = self.steps_completed
        epoch_idx = batch_idx // self._epoch_len if self._epoch_len else 0
        batch = to_device(self._next_batch(), context.device)
        context._current_batch_idx = batch_idx
        with _distributed.gradient_sync(context.models, context.is_update_batch()):
            metrics = self._call_train_batch(batch, epoch_idx, batch_idx)
        if context.lr_schedulers and context.is_update_batch():
            for scheduler in context.lr_schedulers:
                if scheduler.should_step_after_batch(batch_idx, self._epoch_len or 1, context._aggregation_frequency):
                    scheduler.step()
        self._batches_since_report.add(metrics)
        self.steps_completed = batch_idx + 1

    def _call_train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        context = self.context
        if not self._old_api:
            output = self.trial.train_batch(batch, epoch_idx, batch_idx)
            return metrics_of_train_batch(output, self.trial_class.__name__)
        output = self.trial.train_batch(batch, context.models[0], epoch_idx, batch_idx)
        metrics = metrics_of_train_batch(output, self.trial_class.__name__)
        if "loss" not in metrics:
            raise errors.InvalidTrialError(
                f"{self.trial_class.__name__}.train_batch() returned a dict without \"loss\"; the 0.12 API "
                "needs the loss to run backward and the optimizer step"
            )
        context.backward(metrics["loss"])
        for optimizer in context.optimizers:
            context.step_optimizer(optimizer)
        return metrics

    def _unreported_batches(self) -> int:
        return len(self._batches_since_report)

    def _report_training_metrics(self) -> None:
        if not len(self._batches_since_report):
            return
        averages, per_batch = self._batches_since_report.flush()
        if self._size > 1 and self._average_training_metrics:
            # Every rank trained the same number of batches: the mean of the ranks' means is the mean
            # over all batches of all ranks.
            gathered = self.context.distributed.gather((averages, per_batch))
            if gathered is None:
                return
            averages = _mean_of_dicts([g[0] for g in gathered])
            per_batch = [_mean_of_dicts(list(batches)) for batches in zip(*(g[1] for g in gathered))]
        self.core.train.report_training_metrics(self.steps_completed, averages, per_batch)

    # -- validation ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _evaluation_mode(self) -> Iterator[None]:
        # Validation must not shift the training RNG streams: a run validated at other points (or resumed
        # from a checkpoint taken after a validation) trains on exactly the same random numbers.
        rng_state = _checkpoint.capture_rng_state(self.context.device)
        for model in self.context.models:
            model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            for model in self.context.models:
                model.train()
            _checkpoint.restore_rng_state(rng_state, self.context.device)

    def _validate(self) -> Dict[str, Any]:
        for callback in self.callbacks.values():
            callback.on_validation_start()
            callback.on_validation_step_start()
        with self._evaluation_mode():
            if self._evaluate_method == "evaluate_batch":
                metrics = self._evaluate_batches()
            else:
                metrics = self._evaluate_full_dataset()
        self._validated(metrics)
        for callback in self.callbacks.values():
            callback.on_validation_end(metrics)
            callback.on_validation_step_end(metrics)
        return metrics

    def _evaluate_batches(self) -> Dict[str, Any]:
        loader = self.validation_loader.get_data_loader(
            repeat=False, skip=0, num_replicas=self._size, rank=self._rank, seed=self.context.get_trial_seed()
        )
        model = _distributed.unwrap(self.context.models[0])
        accumulator = MetricAccumulator()
        for batch in loader:
            batch = to_device(batch, self.context.device)
            if self._evaluate_takes_model:
                accumulator.add(self.trial.evaluate_batch(batch, model))
            else:
                accumulator.add(self.trial.evaluate_batch(batch))
        reducer = self.trial.evaluation_reducer()
        partials = accumulator.partials(reducer)
        gathered = self.context.distributed.allgather(partials) if self._size > 1 else [partials]
        names: List[str] = []
        for rank_partials in gathered:
            names.extend(n for n in rank_partials if n not in names)
        if not names:
            raise errors.InvalidTrialError(
                f"the validation data loader of {self.trial_class.__name__} yielded no batches: "
                "evaluate_batch() was never called, so there are no validation metrics"
            )
        return {
            name: to_python(combine_partials(reducer_for(reducer, name), [g[name] for g in gathered if name in g]))
            for name in names
        }

    def _evaluate_full_dataset(self) -> Dict[str, Any]:
        metrics: Optional[Dict[str, Any]] = None
        if self._rank == 0:
            loader = self.validation_loader.get_data_loader(
                repeat=False, skip=0, num_replicas=1, rank=0, seed=self.context.get_trial_seed()
            )
            if self._evaluate_takes_model:
                metrics = self.trial.evaluate_full_dataset(loader, _distributed.unwrap(self.context.models[0]))
            else:
                metrics = self.trial.evaluate_full_dataset(loader)
            if not isinstance(metrics, dict):
                raise errors.InvalidTrialError(
                    f"{self.trial_class.__name__}.evaluate_full_dataset() must return a dict of metric name -> "
                    f"value, got {type(metrics).__name__}"
                )
            metrics = {name: _plain(value) for name, value in metrics.items()}
        if self._size > 1:
            metrics = self.context.distributed.broadcast(metrics)
        assert metrics is not None
        return metrics

    # -- checkpoints ---------------------------------------------------------------------------------

    def _state(self) -> Dict[str, Any]:
        context = self.context
        return {
            "models_state_dict": [_distributed.unwrap(m).state_dict() for m in context.models],
            "optimizers_state_dict": [o.state_dict() for o in context.optimizers],
            "lr_schedulers_state_dict": [s.state_dict() for s in context.lr_schedulers],
            "callbacks": {name: cb.state_dict() for name, cb in self.callbacks.items()},
            "rng_state": _checkpoint.capture_rng_state(context.device),
            "steps_completed": self.steps_completed,
            "last_validation": self._last_validation,
        }

    def _load_data(self) -> Dict[str, Any]:
        return {
            "trial_type": "PyTorchTrial",
            "trial_cls_spec": _checkpoint.trial_class_spec(self.trial_class),
            "is_old_api": self._old_api,
            "framework": _checkpoint.framework(),
            "format": _checkpoint.FORMAT,
            "hparams": self.context.get_hparams(),
            "trial_seed": self.context.get_trial_seed(),
            "experiment_config": self.context.get_experiment_config(),
        }

    def _checkpoint(self) -> None:
        if self._rank == 0:
            metadata = self._checkpoint_metadata(_checkpoint.framework(), _checkpoint.FORMAT)
            with self.core.checkpoint.store_path(metadata) as (path, _uuid):
                _checkpoint.write_checkpoint(path, self._state(), self._load_data())
        self._last_checkpoint = self.steps_completed

    def _restore(self) -> None:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            return
        with self.core.checkpoint.restore_path(uuid) as path:
            state = _checkpoint.read_state(path, map_location=self.context.device)
        context = self.context
        _checkpoint.load_into([_distributed.unwrap(m) for m in context.models], state["models_state_dict"], "models")
        _checkpoint.load_into(context.optimizers, state["optimizers_state_dict"], "optimizers")
        _checkpoint.load_into(context.lr_schedulers, state["lr_schedulers_state_dict"], "LR schedulers")
        for name, callback_state in state["callbacks"].items():
            if name not in self.callbacks:
                raise errors.DeterminedError(
                    f"the checkpoint holds the state of callback {name!r}, which build_callbacks() no longer returns"
                )
            self.callbacks[name].load_state_dict(callback_state)
        if "rng_state" in state:
            _checkpoint.restore_rng_state(state["rng_state"], context.device)
        self._resume_at_platform_steps(state)
        logger.info("restored checkpoint %s at %d batches", uuid, self.steps_completed)


def _mean_of_dicts(dicts: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per name, the mean of the numeric values the dicts hold (non-numeric values: the first one's)."""
    names: List[str] = []
    for d in dicts:
        names.extend(n for n in d if n not in names)
    out: Dict[str, Any] = {}
    for name in names:
        values = [d[name] for d in dicts if name in d and d[name] is not None]
        try:
            mean = np.mean(np.asarray(values, dtype=np.float64), axis=0)
        except (TypeError, ValueError):
            out[name] = values[0] if values else None
            continue
        out[name] = float(mean) if np.ndim(mean) == 0 else mean.tolist()
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        return value.item() if value.size == 1 else value.tolist()
    return value
