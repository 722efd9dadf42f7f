"""PyTorchTrialController: drives a PyTorchTrial through the searcher operations of a core context."""
import contextlib
import itertools
import logging
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Type

import numpy as np
import torch

from determined import errors
from determined._trial_loop import BatchLoop
from determined.pytorch import _amp, _checkpoint, _distributed, _trial
from determined.pytorch._build_trial import check_registered, instantiate_trial
from determined.pytorch._callback import Callbacks
from determined.pytorch._context import PyTorchTrialContext, _pick_device
from determined.pytorch._data import DataLoader
from determined.pytorch._lr_scheduler import LRSchedulerStepMode
from determined.pytorch._reducer import MetricAccumulator, combine_partials, reducer_for, to_python
from determined.pytorch._to_device import to_device
from determined.pytorch._training_metrics import TrainingMetrics, metrics_of_train_batch

logger = logging.getLogger("determined.pytorch")

# Seconds of training between two checks, by the ranks of a multi-slot trial, of whether to stop.
STOP_CHECK_S = 0.5


def _check_loader(loader: Any, trial_name: str, method: str, any_torch_loader: bool) -> Any:
    """The trial's data loader: a det.pytorch.DataLoader, or any torch DataLoader once the trial disabled the
    dataset reproducibility checks."""
    if isinstance(loader, DataLoader):
        return loader
    if isinstance(loader, torch.utils.data.DataLoader):
        if any_torch_loader:
            return loader
        raise errors.InvalidTrialError(
            f"{trial_name}.{method}() returned a torch.utils.data.DataLoader; return a "
            "determined.pytorch.DataLoader instead (same arguments: det.pytorch.DataLoader(dataset, "
            "batch_size=..., shuffle=...)), so that Determined can resume it at the exact batch; or call "
            "context.experimental.disable_dataset_reproducibility_checks() in __init__ to use your own loader"
        )
    if any_torch_loader and isinstance(loader, Iterable):
        return loader
    raise errors.InvalidTrialError(
        f"{trial_name}.{method}() must return a determined.pytorch.DataLoader, got {type(loader).__name__}"
    )


def _repeat(loader: Iterable[Any]) -> Iterator[Any]:
    """A loader of the trial's own, epoch after epoch."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise errors.InvalidTrialError("the training data loader yields no batches")


class PyTorchTrialController(BatchLoop):
    """Trains, validates and checkpoints a PyTorchTrial as the searcher operations of its core context ask.

    For each operation: train batch by batch up to `op.length` batches in total, report training metrics
    every `scheduling_unit` batches, validate when `min_validation_period` is due, checkpoint when
    `min_checkpoint_period` or `checkpoint_policy` says so; at the end of the operation validate,
    checkpoint if anything is unsaved, and report the searcher metric. Preemption is checked after every
    batch: the controller then checkpoints and returns. The trial's callbacks run at their moments (see
    PyTorchCallback), and the metrics of its wrapped reducers are added to every report.
    """

    context: PyTorchTrialContext
    _logger = logger
    # At most this many validation batches per rank (the Trainer API's test mode: 1); None: the whole loader.
    _max_validation_batches: Optional[int] = None

    def __init__(self, trial_class: Type[Any], context: PyTorchTrialContext, trial: Any = None) -> None:
        """`trial`: the user's trial, already built with `context` (the Trainer API); else it is built here."""
        super().__init__(trial_class, context)
        self._has_ddp: Optional[bool] = None  # whether a model is wrapped in DDP (known at the first batch)
        # whether the trial measures its batches with the default get_batch_length (then the loop measures the
        # usual batches itself, without the call)
        self._default_batch_length = getattr(trial_class, "get_batch_length", None) is _trial.PyTorchTrial.get_batch_length
        name = trial_class.__name__
        self._evaluate_method = _trial.check_evaluate_methods(trial_class)
        self._old_api = _trial.uses_old_api(trial_class)
        self._steps_for_trial = self._old_api and _trial.builds_its_model(trial_class)
        self._evaluate_argument = _trial.evaluate_argument(trial_class, self._evaluate_method)
        self._read_config(context.get_experiment_config())

        if trial is None:
            trial = instantiate_trial(trial_class, context)
        else:
            check_registered(trial_class, context)
        self.trial = trial
        self.callbacks = Callbacks(self.trial.build_callbacks(), name)
        context._callbacks = self.callbacks.by_name
        own_loaders = context.experimental._data_repro_checks_disabled
        self.training_loader = _check_loader(
            self.trial.build_training_data_loader(), name, "build_training_data_loader", own_loaders
        )
        self.validation_loader = _check_loader(
            self.trial.build_validation_data_loader(), name, "build_validation_data_loader", own_loaders
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
        # Every rank hears each checkpoint's uuid (on_checkpoint_upload_end) only when a callback wants it;
        # the ranks must then also agree on every checkpoint, so the chief shares whether a validation is best.
        self._share_checkpoints = self._size > 1 and self.callbacks.any_overrides("on_checkpoint_upload_end")
        self._broadcast_validation_was_best = self._share_checkpoints
        # Records trained since the last report (get_batch_length), for the throughput in the log.
        self._records_since_report: Optional[int] = 0
        self._report_started = time.monotonic()

    # -- configuration -------------------------------------------------------------------------------

    def _read_config(self, config: Dict[str, Any]) -> None:
        super()._read_config(config)
        if self._checkpoint_policy not in ("best", "all", "none"):
            raise errors.DeterminedError(
                f"checkpoint_policy must be best, all or none, got {self._checkpoint_policy!r}"
            )

    def _training_epoch_len(self) -> Optional[int]:
        try:
            if isinstance(self.training_loader, DataLoader):
                length: Optional[int] = self.training_loader.per_rank_len(self.context.distributed.size)
            else:
                length = len(self.training_loader)  # the trial's own loader is sharded by the trial
        except TypeError:
            length = None
        if length is None and any(
            s.step_mode is LRSchedulerStepMode.STEP_EVERY_EPOCH for s in self.context.lr_schedulers
        ):
            raise errors.InvalidTrialError(
                "an LR scheduler steps every epoch, but the training data loader has no length (an "
                "IterableDataset without __len__): use STEP_EVERY_BATCH or MANUAL_STEP, or give the dataset a length"
            )
        return length or None

    # -- entry point ---------------------------------------------------------------------------------

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        """Seed torch; with several slots, join the trial's torch.distributed process group."""
        torch.manual_seed(trial_seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(trial_seed)
        if distributed is not None:
            cls.join_process_group(distributed)

    @classmethod
    def join_process_group(cls, distributed: Any) -> None:
        """With several ranks, join their torch.distributed process group (gloo on CPU, nccl on GPU)."""
        if distributed.size > 1:
            _distributed.init_process_group(distributed, _pick_device(distributed.local_rank))

    def run(self) -> None:
        """on_trial_startup, restore, on_training_start, the searcher's operations; on_trial_shutdown however
        it ends."""
        info = self.core.info
        self._run_trial(int(info.steps_completed), info.latest_checkpoint, self._restore, self._run_operations)

    def _run_trial(self, first_batch: int, checkpoint_uuid: Optional[str], restore: Callable[[], Any],
                   train: Callable[[], Any]) -> None:
        """on_trial_startup, `restore()`, on_training_start, `train()`; on_trial_shutdown however it ends."""
        with contextlib.ExitStack() as stack:
            for callback in self.callbacks.values():
                callback.on_trial_startup(first_batch, checkpoint_uuid)
                stack.callback(callback.on_trial_shutdown)
            stack.callback(self._close)
            restore()
            self.callbacks.fire("on_training_start")
            for model in self.context.models:
                model.train()
            train()

    def _close(self) -> None:
        self._train_iterator = None
        if self.context._tensorboard_writer is not None:
            self.context._tensorboard_writer.flush()

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

    def _allgather(self, value: Any) -> List[Any]:
        return self.context.distributed.allgather(value) if self._size > 1 else [value]

    # -- training ------------------------------------------------------------------------------------

    def _next_batch(self) -> Any:
        if self._train_iterator is None:
            if isinstance(self.training_loader, DataLoader):
                loader: Iterable[Any] = self.training_loader.get_data_loader(
                    repeat=True,
                    skip=self.steps_completed,
                    num_replicas=self._size,
                    rank=self._rank,
                    seed=self.context.get_trial_seed(),
                )
                self._train_iterator = iter(loader)
            else:
                self._train_iterator = _repeat(self.training_loader)
        return next(self._train_iterator)

    def _train_one_batch(self) -> None:
        context = self.context
        batch_idx = self.steps_completed
        epoch_len = self._epoch_len
        epoch_idx, index_in_epoch = divmod(batch_idx, epoch_len) if epoch_len else (0, batch_idx)
        if not self._batches_since_report._batches:  # a new training period
            context._reducers.reset()
            self._report_started = time.monotonic()
        context._current_batch_idx = batch_idx
        if epoch_len and index_in_epoch == 0:
            self.callbacks.training_epoch_start(epoch_idx)
        batch = next(self._train_iterator) if self._train_iterator is not None else self._next_batch()
        if context.experimental._auto_to_device:
            batch = to_device(batch, context.device)
        if context._use_apex:
            context._apex_loss_ids = {}
        if self._has_ddp is None:  # the models are wrapped in the trial's __init__, before the first batch
            self._has_ddp = any(isinstance(m, _distributed.DistributedDataParallel) for m in context.models)
        if self._has_ddp and not context.is_update_batch():
            with _distributed.gradient_sync(context.models, False):  # aggregating: no exchange of gradients
                metrics = self._call_train_batch(batch, epoch_idx, batch_idx)
        elif not self._old_api:
            output = self.trial.train_batch(batch, epoch_idx, batch_idx)
            metrics = output if type(output) is dict else metrics_of_train_batch(output, self.trial_class.__name__)
        else:
            metrics = self._call_train_batch(batch, epoch_idx, batch_idx)
        if context.experimental._auto_amp and context.is_update_batch():
            context._scaler.update()
        if context.lr_schedulers and context.is_update_batch():
            for scheduler in context.lr_schedulers:
                if scheduler.should_step_after_batch(batch_idx, epoch_len or 1, context._aggregation_frequency):
                    scheduler.step()
        self._batches_since_report.add(metrics)
        self._count_records(batch)
        self.steps_completed = batch_idx + 1
        if epoch_len and index_in_epoch == epoch_len - 1:
            self.callbacks.fire("on_training_epoch_end", epoch_idx)

    def _count_records(self, batch: Any) -> None:
        if self._records_since_report is None:
            return
        if self._default_batch_length:  # the usual batch: a tuple or list whose first item is a tensor
            first = batch[0] if type(batch) is tuple or type(batch) is list else batch
            if type(first) is torch.Tensor:
                try:
                    self._records_since_report += first.size(0)
                    return
                except IndexError:  # a 0-dimensional tensor: get_batch_length says what it holds
                    pass
        try:
            self._records_since_report += int(self.trial.get_batch_length(batch))
        except Exception as e:  # only the throughput in the log depends on it
            logger.info("records per second are not logged: %s.get_batch_length() failed: %s",
                        self.trial_class.__name__, e)
            self._records_since_report = None

    def _call_train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        context = self.context
        if not self._old_api:
            output = self.trial.train_batch(batch, epoch_idx, batch_idx)
            return metrics_of_train_batch(output, self.trial_class.__name__)
        output = self.trial.train_batch(batch, context.models[0], epoch_idx, batch_idx)
        metrics = metrics_of_train_batch(output, self.trial_class.__name__)
        if not self._steps_for_trial:  # it wrapped its own models and steps its optimizers itself
            return metrics
        if "loss" not in metrics:
            raise errors.InvalidTrialError(
                f"{self.trial_class.__name__}.train_batch() returned a dict without \"loss\"; the 0.12 API "
                "needs the loss to run backward and the optimizer step"
            )
        context.backward(metrics["loss"])
        for optimizer in context.optimizers:
            context.step_optimizer(optimizer)
        return metrics

    def _counters(self) -> Dict[str, Any]:
        """Added to every training and validation report: nothing here (the Trainer API adds its counters)."""
        return {}

    def _unreported_batches(self) -> int:
        return len(self._batches_since_report)

    def _report_training_metrics(self) -> None:
        batches = len(self._batches_since_report)
        if not batches:
            return
        averages, per_batch = self._batches_since_report.flush()
        reduced = self.context._reducers.reduce(True, self._allgather)
        if self._size > 1 and self._average_training_metrics:
            # Every rank trained the same number of batches: the mean of the ranks' means is the mean
            # over all batches of all ranks.
            gathered = self.context.distributed.gather((averages, per_batch))
            if gathered is not None:
                averages = _mean_of_dicts([g[0] for g in gathered])
                per_batch = [_mean_of_dicts(list(batches)) for batches in zip(*(g[1] for g in gathered))]
        averages.update({name: to_python(value) for name, value in reduced.items()})
        averages.update(self._counters())
        self.core.train.report_training_metrics(self.steps_completed, averages, per_batch)
        self._log_throughput(batches)
        if self.callbacks.any_overrides("on_training_workload_end"):
            if self._size > 1:
                averages, per_batch = self.context.distributed.broadcast((averages, per_batch))
            self.callbacks.fire("on_training_workload_end", averages, per_batch)

    def _log_throughput(self, batches: int) -> None:
        elapsed = time.monotonic() - self._report_started
        records = self._records_since_report
        if records is not None:
            self._records_since_report = 0
        if self._rank != 0 or elapsed <= 0:
            return
        if records is None:
            logger.info("trained %d batches up to batch %d: %.1f batches/s", batches, self.steps_completed,
                        batches / elapsed)
        else:
            logger.info("trained %d batches up to batch %d: %.1f records/s (%d records per slot)", batches,
                        self.steps_completed, records * self._size / elapsed, records)

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
        self.context._reducers.reset()
        self.callbacks.validation_start()
        with self._evaluation_mode():
            if self._evaluate_method == "evaluate_batch":
                metrics = self._evaluate_batches()
            else:
                metrics = self._evaluate_full_dataset()
            reduced = self.context._reducers.reduce(False, self._allgather)
        metrics.update({name: to_python(value) for name, value in reduced.items()})
        self.callbacks.validation_end(metrics)
        metrics.update(self._counters())
        self._validated(metrics)
        return metrics

    def _validation_batches(self, sharded: bool) -> Iterable[Any]:
        loader = self.validation_loader
        if isinstance(loader, DataLoader):
            loader = loader.get_data_loader(
                repeat=False, skip=0, num_replicas=self._size if sharded else 1, rank=self._rank if sharded else 0,
                seed=self.context.get_trial_seed(),
            )
        # (else the trial's own loader, sharded (or not) by the trial)
        if self._max_validation_batches is not None:
            return itertools.islice(loader, self._max_validation_batches)
        return loader

    def _evaluate_batches(self) -> Dict[str, Any]:
        model = _distributed.unwrap(self.context.models[0])
        keep_outputs = self.callbacks.any_overrides("on_validation_epoch_end")
        outputs: List[Any] = []
        accumulator = MetricAccumulator()
        self.callbacks.fire("on_validation_epoch_start")
        for batch_idx, batch in enumerate(self._validation_batches(sharded=True)):
            if self.context.experimental._auto_to_device:
                batch = to_device(batch, self.context.device)
            if self._evaluate_argument == "model":
                output = self.trial.evaluate_batch(batch, model)
            elif self._evaluate_argument == "batch_idx":
                output = self.trial.evaluate_batch(batch, batch_idx)
            else:
                output = self.trial.evaluate_batch(batch)
            accumulator.add(output)
            if keep_outputs:
                outputs.append(output)
        self.callbacks.fire("on_validation_epoch_end", outputs)
        return self._combined_validation_metrics(accumulator, self.trial.evaluation_reducer())

    def _combined_validation_metrics(self, accumulator: MetricAccumulator, reducer: Any) -> Dict[str, Any]:
        """The validation metrics of every rank's batches, combined by `reducer` (a collective)."""
        partials = accumulator.partials(reducer)
        gathered = self._allgather((partials, accumulator.num_batches))
        if not sum(count for _, count in gathered):
            raise errors.InvalidTrialError(
                f"the validation data loader of {self.trial_class.__name__} yielded no batches: "
                "evaluate_batch() was never called, so there are no validation metrics"
            )
        names: List[str] = []
        for rank_partials, _ in gathered:
            names.extend(n for n in rank_partials if n not in names)
        return {
            name: to_python(combine_partials(reducer_for(reducer, name), [g[name] for g, _ in gathered if name in g]))
            for name in names
        }

    def _evaluate_full_dataset(self) -> Dict[str, Any]:
        metrics: Optional[Dict[str, Any]] = None
        if self._rank == 0:
            loader = self._validation_batches(sharded=False)
            if self._evaluate_argument == "model":
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
        state = {
            "models_state_dict": [_distributed.unwrap(m).state_dict() for m in context.models],
            "optimizers_state_dict": [o.state_dict() for o in context.optimizers],
            "lr_schedulers_state_dict": [s.state_dict() for s in context.lr_schedulers],
            "callbacks": self.callbacks.state_dicts(),
            "rng_state": _checkpoint.capture_rng_state(context.device),
            "steps_completed": self.steps_completed,
            "last_validation": self._last_validation,
        }
        if context._scaler is not None:
            state["scaler_state_dict"] = context._scaler.state_dict()
        if context._use_apex:
            state["amp_state"] = _amp.apex_state_dict()
        return state

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
        """Chief: on_checkpoint_save_start (may change the state), write, on_checkpoint_write_end, upload and
        record; every rank that hears the uuid: on_checkpoint_upload_end."""
        uuid: Optional[str] = None
        if self._rank == 0:
            state = self._state()
            self.callbacks.fire("on_checkpoint_save_start", state)
            metadata = self._checkpoint_metadata(_checkpoint.framework(), _checkpoint.FORMAT)
            with self.core.checkpoint.store_path(metadata) as (path, uuid):
                _checkpoint.write_checkpoint(path, state, self._load_data())
                self._write_checkpoint_extras(path)
                self.callbacks.checkpoint_write_end(str(path))
        self._last_checkpoint = self.steps_completed
        if self._share_checkpoints:
            uuid = self.context.distributed.broadcast(uuid)
        if uuid is not None:
            self.callbacks.fire("on_checkpoint_upload_end", uuid)

    def _write_checkpoint_extras(self, path: Any) -> None:
        """More files of a checkpoint, written after state_dict.pth and load_data.json (none here)."""

    def _restore(self) -> None:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            return
        state = self._load_checkpoint(uuid)
        self._resume_at_platform_steps(state)
        logger.info("restored checkpoint %s at %d batches", uuid, self.steps_completed)

    def _load_checkpoint(self, uuid: str) -> Dict[str, Any]:
        """Load the checkpoint `uuid` into the models, optimizers, schedulers, callbacks and RNGs; its state."""
        with self.core.checkpoint.restore_path(uuid) as path:
            # Onto the CPU, as Determined loads: load_state_dict copies weights and optimizer state to their
            # parameters' device, and the RNG states must stay CPU byte tensors.
            state = _checkpoint.read_state(path, map_location="cpu")
            self._read_checkpoint_extras(path, state)
        self.callbacks.fire("on_checkpoint_load_start", state)
        context = self.context
        _checkpoint.load_into([_distributed.unwrap(m) for m in context.models], state["models_state_dict"], "models")
        _checkpoint.load_into(context.optimizers, state["optimizers_state_dict"], "optimizers")
        _checkpoint.load_into(context.lr_schedulers, state["lr_schedulers_state_dict"], "LR schedulers")
        if context._scaler is not None and state.get("scaler_state_dict") is not None:
            context._scaler.load_state_dict(state["scaler_state_dict"])
        if context._use_apex and state.get("amp_state") is not None:
            _amp.apex_load_state_dict(state["amp_state"])
        self.callbacks.load_state_dicts(state["callbacks"])
        if "rng_state" in state:
            _checkpoint.restore_rng_state(state["rng_state"], context.device)
        return state

    def _read_checkpoint_extras(self, path: Any, state: Dict[str, Any]) -> None:
        """Read more of the checkpoint at `path` into `state` while it is there (nothing here)."""


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
