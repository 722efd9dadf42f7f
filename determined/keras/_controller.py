"""TFKerasTrialController: drives a TFKerasTrial through the searcher operations of a core context."""
import contextlib
import logging
import math
import pathlib
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple, Type

import numpy as np
import tensorflow as tf

from determined import errors, tensorflow as det_tf
from determined._trial import construct_trial
from determined._trial_loop import BatchLoop
from determined.config.hparams import GLOBAL_BATCH_SIZE_HOW
from determined.keras import _checkpoint, _data, _distributed, callbacks as det_callbacks
from determined.keras._build_model import build_checked_model
from determined.keras._tf_keras_context import TFKerasTrialContext
from determined.tensorflow import _tf1_compat

logger = logging.getLogger("determined.keras")

VALIDATION_PREFIX = "val_"


def _number(name: str, value: Any) -> float:
    try:
        return float(np.asarray(value).item())
    except (TypeError, ValueError):
        raise errors.InvalidTrialError(
            f"metric {name!r} has the value {value!r}; tf.keras metrics must be scalars"
        ) from None


def _named(model: tf.keras.Model, values: Any) -> Dict[str, Any]:
    if not isinstance(values, (list, tuple)):
        values = [values]
    return dict(zip(model.metrics_names, values))


class _MetricWindow:
    """Per-batch training metrics since the last report (or epoch end), and their averages."""

    def __init__(self) -> None:
        self.batches: List[Dict[str, float]] = []

    def __len__(self) -> int:
        return len(self.batches)

    def add(self, metrics: Dict[str, float]) -> None:
        self.batches.append(metrics)

    def averages(self) -> Dict[str, float]:
        names: List[str] = []
        for batch in self.batches:
            names.extend(n for n in batch if n not in names)
        return {
            name: float(np.mean([b[name] for b in self.batches if name in b])) for name in names
        }

    def flush(self) -> Tuple[Dict[str, float], List[Dict[str, float]]]:
        averages, batches = self.averages(), self.batches
        self.batches = []
        return averages, batches


class TFKerasTrialController(BatchLoop):
    """Trains, validates and checkpoints a TFKerasTrial as the searcher operations of its core context ask.

    For each operation: train batch by batch (``model.train_on_batch``) up to `op.length` batches in
    total, report training metrics every `scheduling_unit` batches, validate (``model.evaluate`` over the
    whole validation loader, metrics prefixed ``val_``) when `min_validation_period` is due and at the end
    of the operation, checkpoint when `min_checkpoint_period` or `checkpoint_policy` says so and before
    completing the operation. Preemption and early-stop requests are checked after every batch.
    """

    context: TFKerasTrialContext
    _logger = logger
    _broadcast_validation_was_best = True  # every rank saves the model (see _checkpoint)

    def __init__(self, trial_class: Type[Any], context: TFKerasTrialContext) -> None:
        super().__init__(trial_class, context)
        name = trial_class.__name__
        if not isinstance(context, TFKerasTrialContext):
            raise errors.InvalidTrialError(
                f"{name} got a {type(context).__name__}; a TFKerasTrial needs a TFKerasTrialContext (leave "
                "trial_context_class as it is, or subclass TFKerasTrialContext)"
            )
        self._read_config(context.get_experiment_config())
        self._native = bool(getattr(trial_class, "_det_native", False))
        if not self._native and "global_batch_size" not in context.get_hparams():
            raise errors.InvalidTrialError(
                f"hyperparameters.global_batch_size: missing; a TFKerasTrial ({name}) batches its data with it: "
                f"{GLOBAL_BATCH_SIZE_HOW}"
            )
        self._rank = context.distributed.rank
        self._size = context.distributed.size
        # With several slots: the MultiWorkerMirroredStrategy that pre_execute_hook joined.
        self._strategy = det_tf.current_strategy() if self._size > 1 else None
        if self._size > 1:
            det_tf.check_global_batch_size(context.get_hparams(), self._size)
            if self._strategy is None:
                raise errors.DeterminedError(
                    f"{name} runs on {self._size} slots but no MultiWorkerMirroredStrategy was created: run it "
                    "through determined's execution (pre_execute_hook joins the ranks' TensorFlow cluster)"
                )

        with self._scope():
            self.trial = construct_trial(trial_class, context)
            if not tf.executing_eagerly():
                if self._size > 1:
                    raise errors.InvalidTrialError(
                        f"{name} disables eager execution, which multi-slot training does not support: keep "
                        "eager execution on, or set resources.slots_per_trial to 1"
                    )
                self._enter_graph_mode()
            self.model = build_checked_model(self.trial, context, name)
        if self._strategy is not None:
            _distributed.prepare(self.model, self._strategy, name)
        callbacks = self.trial.keras_callbacks()
        if not isinstance(callbacks, (list, tuple)) or not all(
            isinstance(c, tf.keras.callbacks.Callback) for c in callbacks
        ):
            raise errors.InvalidTrialError(
                f"{name}.keras_callbacks() must return a list of tf.keras.callbacks.Callback objects"
            )
        for callback in callbacks:
            if isinstance(callback, det_callbacks.TensorBoard):  # this trial's directory, whatever it was made with
                callback.log_dir = str(self.core.train.get_tensorboard_path())
        self.callbacks = tf.keras.callbacks.CallbackList(
            list(callbacks), add_history=False, add_progbar=False, model=self.model
        )

        seed = context.get_trial_seed()
        batch_size = self._batch_size()
        self.training_loader = _data.adapt_loader(
            self.trial.build_training_data_loader(), batch_size=batch_size, training=True, seed=seed,
            where=f"{name}.build_training_data_loader()",
        )
        self.validation_loader = _data.adapt_loader(
            self.trial.build_validation_data_loader(), batch_size=batch_size, training=False, seed=seed,
            where=f"{name}.build_validation_data_loader()",
        )
        if isinstance(self.training_loader, tf.data.Dataset) and context._wrapped_datasets == 0:
            logger.warning(
                "%s returns a tf.data.Dataset that was not passed to context.wrap_dataset(); wrap each dataset "
                "right after creating it so that it is sharded when the trial uses several slots", name,
            )
        self.stream = _data.TrainingStream(
            self.training_loader, f"{name}.build_training_data_loader()", self._rank, self._size
        )
        self.callbacks.set_params({"verbose": 0, "epochs": None, "steps": self.stream.epoch_len})

        self._window = _MetricWindow()
        self._epoch_window = _MetricWindow()

    # -- configuration -------------------------------------------------------------------------------

    def _scope(self) -> Any:
        return self._strategy.scope() if self._strategy is not None else contextlib.nullcontext()

    def _batch_size(self) -> Optional[int]:
        if "global_batch_size" in self.context.get_hparams():
            return self.context.get_per_slot_batch_size()
        return getattr(self.trial, "_det_batch_size", None)

    def _enter_graph_mode(self) -> None:
        """Eager execution was turned off in the trial's __init__: seed the graph, open the session."""
        tf.compat.v1.set_random_seed(self.context.get_trial_seed())
        config = self.trial.session_config()
        if not isinstance(config, tf.compat.v1.ConfigProto):
            raise errors.InvalidTrialError(
                f"{self.trial_class.__name__}.session_config() must return a tf.compat.v1.ConfigProto, got "
                f"{type(config).__name__}"
            )
        tf.compat.v1.keras.backend.set_session(tf.compat.v1.Session(config=config))
        logger.info("eager execution is disabled: training in graph mode")

    # -- entry point ---------------------------------------------------------------------------------

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        """With several slots, join the ranks' TensorFlow cluster first (before TensorFlow runs anything);
        then reset Keras and seed it."""
        if distributed is not None and distributed.size > 1:
            det_tf.multi_worker_strategy(distributed)
        tf.keras.backend.clear_session()
        tf.keras.utils.set_random_seed(trial_seed % 2**32)

    def run(self) -> None:
        self._restore()
        self.callbacks.on_train_begin()
        try:
            self._run_operations()
            self.callbacks.on_train_end()
        finally:
            self.stream.close()

    def _missing_searcher_metric(self, name: str, metrics: Dict[str, Any]) -> str:
        hint = ""
        if VALIDATION_PREFIX + name in metrics:
            hint = f" (validation metrics are prefixed: use searcher.metric: {VALIDATION_PREFIX + name})"
        return (
            f"the validation metrics lack the searcher metric {name!r} (searcher.metric){hint}; the model's "
            f"evaluate() gave: {', '.join(sorted(metrics)) or 'no metrics'}"
        )

    def _config_names(self, metrics: Dict[str, float]) -> Dict[str, float]:
        """`metrics` with the TF 1.x name of the searcher metric (`val_acc` for Keras 2.15's `val_accuracy`) when
        the config asks for it, in training (`acc`) and validation metrics alike."""
        name = self._searcher_metric
        if not name:
            return metrics
        unprefixed = name[len(VALIDATION_PREFIX):] if name.startswith(VALIDATION_PREFIX) else None
        return _tf1_compat.tf1_metric_aliases(metrics, (name, unprefixed))

    # -- training ------------------------------------------------------------------------------------

    def _train_one_batch(self) -> None:
        batch, epoch, index, last = self.stream.next()
        if index == 0:
            self.callbacks.on_epoch_begin(epoch)
        self.callbacks.on_train_batch_begin(index)
        x, y = batch[0], batch[1] if len(batch) > 1 else None
        sample_weight = batch[2] if len(batch) == 3 else None
        if self._strategy is not None:
            logs = _distributed.train_step(self.model, batch)
        elif tf.executing_eagerly():
            logs = self.model.train_on_batch(x, y, sample_weight=sample_weight, reset_metrics=True, return_dict=True)
        else:  # the TF1-style training loop of graph mode returns a list in the order of metrics_names
            logs = _named(self.model, self.model.train_on_batch(x, y, sample_weight=sample_weight, reset_metrics=True))
        metrics = self._config_names({name: _number(name, value) for name, value in logs.items()})
        self.steps_completed += 1
        self._window.add(metrics)
        self._epoch_window.add(metrics)
        self.callbacks.on_train_batch_end(index, dict(metrics))
        if last:
            epoch_logs = self._epoch_window.averages()
            self._epoch_window = _MetricWindow()
            if self._last_validation_metrics:
                epoch_logs.update(self._last_validation_metrics)
            self.callbacks.on_epoch_end(epoch, epoch_logs)
        if getattr(self.model, "stop_training", False):  # a Keras callback (EarlyStopping, ...) asks to stop
            self.model.stop_training = False
            self.context.set_stop_requested(True)

    def _unreported_batches(self) -> int:
        return len(self._window)

    def _report_training_metrics(self) -> None:
        if not len(self._window):
            return
        averages, per_batch = self._window.flush()
        self.core.train.report_training_metrics(self.steps_completed, averages, per_batch)

    # -- validation ----------------------------------------------------------------------------------

    def _validate(self) -> Dict[str, Any]:
        # Validation must not shift the training RNG streams, so that where validations happen (or a
        # resume after one) does not change training.
        rng_state = _checkpoint.capture_rng_state()
        try:
            kwargs = {**_data.evaluate_kwargs(self.validation_loader), "callbacks": self.callbacks, "verbose": 0}
            if self._strategy is not None:
                batches = _data.validation_shard(self.validation_loader, self._rank, self._size)
                logs = _distributed.evaluate_shard(self.model, batches, self.context.distributed, self.callbacks)
            elif tf.executing_eagerly():
                logs = self.model.evaluate(**kwargs, return_dict=True)
            else:
                logs = _named(self.model, self.model.evaluate(**kwargs))
        finally:
            _checkpoint.restore_rng_state(rng_state)
        # The next training batch's metrics must not start from the validation's totals.
        self.model.reset_metrics()
        if not logs:
            raise errors.InvalidTrialError(
                f"the validation data loader of {self.trial_class.__name__} gave no metrics: it yielded no batches"
            )
        metrics = self._config_names({VALIDATION_PREFIX + name: _number(name, value) for name, value in logs.items()})
        if any(not math.isfinite(v) for v in metrics.values()):
            logger.warning("validation metrics after %d batches are not finite: %s", self.steps_completed, metrics)
        self._validated(metrics)
        return metrics

    # -- checkpoints ---------------------------------------------------------------------------------

    def _load_data(self) -> Dict[str, Any]:
        return {
            "trial_type": "TFKerasTrial",
            "trial_cls_spec": None if self._native else _checkpoint.trial_class_spec(self.trial_class),
            "native": self._native,
            "framework": _checkpoint.framework(),
            "format": _checkpoint.FORMAT,
            "hparams": self.context.get_hparams(),
            "trial_seed": self.context.get_trial_seed(),
            "experiment_config": self.context.get_experiment_config(),
        }

    def _checkpoint(self) -> None:
        if self._rank == 0:
            metadata = self._checkpoint_metadata(_checkpoint.framework(), _checkpoint.FORMAT)
            trial_state = {
                "steps_completed": self.steps_completed,
                "last_validation": self._last_validation,
                "data_loader": self.stream.state(),
            }
            with self.core.checkpoint.store_path(metadata) as (path, _uuid):
                _checkpoint.write_checkpoint(
                    path, self.model, trial_state, self._load_data(), full_model=self._native
                )
        else:
            # Saving a model of a MultiWorkerMirroredStrategy may run collectives, so every rank saves;
            # the other ranks into a directory that is thrown away.
            scratch = tempfile.mkdtemp(prefix="det-keras-scratch-")
            try:
                _checkpoint.write_checkpoint(
                    pathlib.Path(scratch), self.model, {}, {}, full_model=self._native
                )
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        self._last_checkpoint = self.steps_completed

    def _restore(self) -> None:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            self.stream.seek(0)
            return
        with self.core.checkpoint.restore_path(uuid) as path, self._scope():
            _checkpoint.restore_weights(path, self.model)
            state = _checkpoint.read_trial_state(path)
            rng_state = _checkpoint.read_rng_state(path)
        own_checkpoint = self._resume_at_platform_steps(state)
        self.stream.seek(self.steps_completed)
        # Last: replaying a Sequence's epoch ends above must not leave the RNGs elsewhere than saved.
        if rng_state is not None and own_checkpoint:
            _checkpoint.restore_rng_state(rng_state)
        logger.info("restored checkpoint %s at %d batches", uuid, self.steps_completed)
