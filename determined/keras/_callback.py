"""Determined 0.38's Keras integration for a plain `model.fit()` script: `DeterminedCallback` and `TensorBoard`.

A script (`entrypoint: python3 train.py`, or through `determined.launch.tensorflow`) builds its model under the
strategy of `DistributedContext.from_tf_config()`, opens `det.core.init()`, and passes the callback to `fit`; the
callback reports, checkpoints, restores and stops on preemption. The TFKerasTrial of earlier releases is untouched
(determined.keras._controller).
"""
import contextlib
import logging
import os
import pathlib
import pickle
import shutil
import tempfile
from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf

from determined import core, errors
from determined.keras.callbacks import drop_log_dir

logger = logging.getLogger("determined.keras")

MODEL_DIR = "model_checkpoint"
STATE_FILE = "callback_state"
# Keys of Keras's logs that are not metrics.
_NOT_METRICS = ("batch", "size")


class _StartAt:
    """Makes `model.fit()` start at a given epoch: Keras asks `model._training_state` for its first (epoch, step)
    right after `on_train_begin` (the hook BackupAndRestore uses)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def maybe_load_initial_counters_from_ckpt(self, *_: Any, **__: Any) -> Tuple[int, int]:
        return self.epoch, 0

    def maybe_load_initial_epoch_from_ckpt(self, *_: Any, **__: Any) -> int:
        return self.epoch


def _metrics(logs: Optional[Dict[str, Any]], *, drop_validation: bool = False) -> Dict[str, Any]:
    metrics = {}
    for name, value in (logs or {}).items():
        if name in _NOT_METRICS or (drop_validation and name.startswith("val_")):
            continue
        metrics[name] = value.item() if hasattr(value, "item") else value
    return metrics


class DeterminedCallback(tf.keras.callbacks.ProgbarLogger):
    """Reports, checkpoints, restores and stops a Keras ``model.fit()`` for the platform (Determined 0.38).

    Pass it in ``fit(callbacks=[...])`` on every rank, with ``epochs=`` the length to train (the trial's progress
    is the share of those epochs done). Do not combine it with ``BackupAndRestore`` or ``ModelCheckpoint``.

    * Training metrics (Keras's logs, plus ``batches`` and ``epochs``) go to the ``training`` group at the end of
      each epoch (``train_metrics_report_period="epoch"``, the ``val_*`` keys left out) or every N batches (an
      int); validation metrics (Keras's test logs, which have no ``val_`` prefix: ``searcher.metric`` names them
      as ``loss``, ``categorical_accuracy``...) to ``validation``, at the batches trained so far.
    * A checkpoint every ``checkpoint_epochs`` epochs (0: only at the end of training or on preemption), and at
      the end of training when epochs were trained since the last one: the weights in ``model_checkpoint``
      (``save_model``) and this callback's state. Every rank takes part (``store_path(shard=True)``), as
      MultiWorkerMirroredStrategy requires; only the chief's files are kept.
    * ``checkpoint``: a checkpoint's storage id to start from (on the platform, ``det.get_cluster_info().
      latest_checkpoint``). Its weights are loaded (``load_model``); when it was written with the same
      ``continue_id`` (a pause or a restart of the same trial: ``info.trial.trial_id``), training also goes on
      at the epoch after the saved one, whatever ``initial_epoch`` says; otherwise (a warm start) it starts at
      ``initial_epoch`` with the loaded weights.
    * At the end of each epoch it asks ``core_context.preempt.should_preempt()``: when the platform asks the
      trial to stop (pause, a search method's stop), it checkpoints and ends ``fit``.
    * Progress is logged as lines (``verbose=1`` prints no bars).

    Subclass and override ``save_model``/``load_model`` to save the model another way.
    """

    # Keras calls a callback on every rank only when it says so.
    _chief_worker_only = False
    _supports_tf_logs = False

    def __init__(
        self,
        core_context: core.Context,
        checkpoint: Optional[str],
        continue_id: Union[int, str],
        *,
        train_metrics_report_period: Union[int, str] = "epoch",
        checkpoint_epochs: int = 1,
    ) -> None:
        tf.keras.callbacks.Callback.__init__(self)  # none of ProgbarLogger's bars
        period = train_metrics_report_period
        if period != "epoch" and (isinstance(period, bool) or not isinstance(period, int) or period < 1):
            raise errors.DeterminedError(
                f"DeterminedCallback(train_metrics_report_period={period!r}): give \"epoch\" or a number of "
                "batches >= 1"
            )
        if isinstance(checkpoint_epochs, bool) or not isinstance(checkpoint_epochs, int) or checkpoint_epochs < 0:
            raise errors.DeterminedError(
                f"DeterminedCallback(checkpoint_epochs={checkpoint_epochs!r}): give a number of epochs >= 0 (0 saves "
                "only at the end of training and on preemption)"
            )
        self._core = core_context
        self._checkpoint = checkpoint
        self._continue_id = continue_id
        self._report_period = period
        self._checkpoint_epochs = checkpoint_epochs
        self._is_chief = core_context.distributed.rank == 0
        self._verbose = False
        self._steps_completed = 0
        self._epoch = -1
        self._epoch_start_steps = 0
        self._last_trained_epoch = -1
        self._last_saved_epoch = -1
        self._last_reported_training = -1
        # Batches per epoch and per validation, known after the first of each: the progress lines' totals.
        self._training_length: Optional[int] = None
        self._validation_length: Optional[int] = None
        self._batches_seen = 0
        self._batches_seen_validating = 0
        self._logged_percent = -1
        # The restored checkpoint's files stay until the first batch ran (TensorFlow reads weights lazily).
        self._restored: Optional[contextlib.ExitStack] = None

    # ProgbarLogger's own behaviour is not wanted: log lines instead of bars, nothing for predict().
    def set_params(self, params: Dict[str, Any]) -> None:
        tf.keras.callbacks.Callback.set_params(self, params)
        self._verbose = bool(params.get("verbose", 0))

    def on_predict_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        pass

    def on_predict_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        pass

    def on_predict_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        pass

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return self._verbose

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def _log_progress(self, what: str, batches: int, total: Optional[int], logs: Optional[Dict[str, Any]]) -> None:
        """One line per 10 % of an epoch (or a validation) whose length is known."""
        if not (self._verbose and self._is_chief and total):
            return
        percent = min(100, batches * 100 // total)
        if percent // 10 * 10 <= self._logged_percent:
            return
        self._logged_percent = percent
        line = f"{what} after {self._steps_completed} batches: {percent}% ({batches}/{total})"
        metrics = _metrics(logs)
        print(f"{line}: {metrics}" if metrics else line, flush=True)

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        if self._checkpoint is not None:
            self._restored = self._restore(self._checkpoint)

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self._epoch = epoch
        self._epoch_start_steps = self._steps_completed
        if isinstance(getattr(self.model, "_training_state", None), _StartAt):
            self.model._training_state = None  # read once by fit(); a later fit() starts where it is told
        self._batches_seen = 0
        self._begin("training", self._training_length)

    def _begin(self, what: str, length: Optional[int]) -> None:
        """The status and the first progress line of a training epoch or of a validation."""
        self._logged_percent = -1
        if self._is_chief:
            self._core.train.set_status(what if what == "training" else "validating")
        self._log_progress(what, 0, length, None)

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        # `batch` is the epoch's last step index (steps_per_execution may run several steps per call).
        self._steps_completed = self._epoch_start_steps + batch + 1
        self._batches_seen = batch + 1
        if self._restored is not None:
            self._restored.close()
            self._restored = None
        if not self._is_chief:
            return
        period = self._report_period
        if isinstance(period, int) and self._steps_completed // period > self._last_reported_training // period:
            self._report_training(logs, drop_validation=False)
        self._log_progress("training", self._batches_seen, self._training_length, logs)

    def _report_training(self, logs: Optional[Dict[str, Any]], *, drop_validation: bool) -> None:
        metrics = {"epochs": self._epoch + 1, "batches": self._steps_completed,
                   **_metrics(logs, drop_validation=drop_validation)}
        self._core.train.report_training_metrics(steps_completed=self._steps_completed, metrics=metrics)
        self._last_reported_training = self._steps_completed

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if self._is_chief:
            if self._report_period == "epoch":
                self._report_training(logs, drop_validation=True)
            total = (self.params or {}).get("epochs")
            if total:
                self._core.train.report_progress(min(1.0, (epoch + 1) / total))
            self._training_length = self._batches_seen or self._training_length
        self._last_trained_epoch = epoch
        if self._checkpoint_epochs and (epoch + 1) % self._checkpoint_epochs == 0:
            self._save(epoch)
        # Every rank asks (the chief's answer is shared); a checkpoint not taken above is taken at on_train_end.
        if self._core.preempt.should_preempt():
            logger.info("the platform asked the trial to stop: it checkpoints after epoch %d and ends fit()",
                        epoch + 1)
            self.model.stop_training = True

    def on_test_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        self._batches_seen_validating = 0
        self._begin("validation", self._validation_length)

    def on_test_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self._batches_seen_validating = batch + 1
        self._log_progress("validation", batch + 1, self._validation_length, logs)

    def on_test_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        if not self._is_chief:
            return
        metrics = {"epochs": self._epoch + 1, "batches": self._steps_completed, **_metrics(logs)}
        self._core.train.report_validation_metrics(steps_completed=self._steps_completed, metrics=metrics)
        self._validation_length = self._batches_seen_validating or self._validation_length

    def on_train_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        if self._restored is not None:  # fit() trained no batch
            self._restored.close()
            self._restored = None
        if self._last_trained_epoch > self._last_saved_epoch:
            self._save(self._last_trained_epoch)
        if self._is_chief:
            self._core.train.set_status("finishing")

    def _save(self, epoch: int) -> None:
        if self._is_chief:
            self._core.train.set_status("checkpointing")
        # Every rank writes (MultiWorkerMirroredStrategy needs all of them to save); the others' files are
        # thrown away by save_model, so the checkpoint holds the chief's.
        with self._core.checkpoint.store_path({"steps_completed": self._steps_completed}, shard=True) as (path, _):
            self.save_model(self.model, str(path / MODEL_DIR), self._core.distributed)
            if self._is_chief:
                state = {"epoch": epoch, "steps_completed": self._steps_completed, "continue_id": self._continue_id,
                         "training_length": self._training_length, "validation_length": self._validation_length}
                with open(path / STATE_FILE, "wb") as f:
                    pickle.dump(state, f)
        self._last_saved_epoch = epoch

    def _restore(self, storage_id: str) -> contextlib.ExitStack:
        if self._is_chief:
            self._core.train.set_status("restoring")
        with contextlib.ExitStack() as stack:
            path = stack.enter_context(self._core.checkpoint.restore_path(storage_id))
            if not (path / STATE_FILE).is_file() and not any(path.glob(f"{MODEL_DIR}*")):
                raise errors.DeterminedError(
                    f"checkpoint {storage_id} was not written by det.keras.DeterminedCallback: it has no "
                    f"{MODEL_DIR} (files: {sorted(p.name for p in path.iterdir())})"
                )
            self.load_model(self.model, str(path / MODEL_DIR), self._core.distributed)
            self._restore_state(path / STATE_FILE, storage_id)
            return stack.pop_all()
        raise AssertionError("unreachable")  # the with block returns or raises

    def _restore_state(self, file: pathlib.Path, storage_id: str) -> None:
        if not file.is_file():
            return
        with open(file, "rb") as f:
            state = pickle.load(f)
        if state.get("continue_id") != self._continue_id:
            logger.info("checkpoint %s belongs to %r, not %r: its weights are loaded and training starts at the "
                        "initial epoch", storage_id, state.get("continue_id"), self._continue_id)
            return
        self._steps_completed = int(state["steps_completed"])
        self._training_length = state.get("training_length")
        self._validation_length = state.get("validation_length")
        start = int(state["epoch"]) + 1
        self._last_trained_epoch = self._last_saved_epoch = start - 1
        self.model._training_state = _StartAt(start)
        logger.info("resuming from checkpoint %s at epoch %d (%d batches trained)", storage_id, start + 1,
                    self._steps_completed)

    def save_model(self, model: tf.keras.Model, path: str, distributed: core.DistributedContext) -> None:
        """Save `model` to `path` inside the checkpoint being written (on every rank). The chief saves its
        weights (``model.save_weights(path)``); the other ranks save to a temporary directory and delete it, as
        MultiWorkerMirroredStrategy requires. Override to save differently (then override ``load_model`` too)."""
        if distributed.rank == 0:
            model.save_weights(path)
            return
        scratch = tempfile.mkdtemp(prefix="det-keras-worker-save-")
        try:
            model.save_weights(os.path.join(scratch, MODEL_DIR))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def load_model(self, model: tf.keras.Model, path: str, distributed: core.DistributedContext) -> None:
        """Load what ``save_model`` wrote at `path` into `model` (default: ``model.load_weights(path)``)."""
        model.load_weights(path)


class TensorBoard(tf.keras.callbacks.TensorBoard):
    """Keras's ``tf.keras.callbacks.TensorBoard`` writing into the trial's TensorBoard directory
    (``core_context.train.get_tensorboard_path()``, which ``det tensorboard start`` serves): a ``log_dir`` given
    here is ignored with a warning. Every other argument is Keras's."""

    def __init__(self, core_context: core.Context, *args: Any, **kwargs: Any) -> None:
        args = drop_log_dir("det.keras.TensorBoard", args, kwargs)
        super().__init__(str(core_context.train.get_tensorboard_path()), *args, **kwargs)
