"""EstimatorTrialController: drives an EstimatorTrial through the searcher operations of a core context.

One `Estimator.train()` call runs for the life of the trial process; a SessionRunHook (`_ControlHook`)
counts batches and, between two batches, does what the platform asks: report training metrics, validate
(`Estimator.evaluate` on the state just saved to the model dir), checkpoint (the model dir's checkpoint
plus one SavedModel per serving_input_receiver_fn), finish searcher operations, and stop the training
when there is no more work or the trial is preempted.
"""
import inspect
import logging
import math
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Type

import numpy as np
import tensorflow as tf

from determined import errors, tensorflow as det_tf
from determined._trial import construct_trial
from determined._trial_loop import HookLoop
from determined.estimator import _checkpoint
from determined.estimator._estimator_context import EstimatorContext, _is_dataset
from determined.estimator._run_hook import RunHook
from determined.estimator._tf1_compat import UserCodeGraph
from determined.tensorflow._tf1_compat import v1_behavior

logger = logging.getLogger("determined.estimator")

# Estimator's own CheckpointSaverHook saves when its session starts and ends; Determined saves the rest.
_NEVER_STEPS = 2**62


class EstimatorParts(NamedTuple):
    estimator: tf.estimator.Estimator
    train_spec: tf.estimator.TrainSpec
    eval_spec: tf.estimator.EvalSpec
    serving_fns: Dict[str, Callable[..., Any]]


class _StopTraining(Exception):
    """Raised by the control hook before the first batch when there is nothing to train."""


def check_parts(name: str, estimator: Any, train_spec: Any, eval_spec: Any, serving_fns: Any) -> EstimatorParts:
    if not isinstance(estimator, tf.compat.v1.estimator.Estimator):
        raise errors.InvalidTrialError(
            f"{name}.build_estimator() must return a tf.estimator.Estimator (premade or custom), got "
            f"{type(estimator).__name__}"
        )
    if not isinstance(train_spec, tf.estimator.TrainSpec):
        raise errors.InvalidTrialError(
            f"{name}.build_train_spec() must return a tf.estimator.TrainSpec, got {type(train_spec).__name__}"
        )
    if not isinstance(eval_spec, tf.estimator.EvalSpec):
        raise errors.InvalidTrialError(
            f"{name}.build_validation_spec() must return a tf.estimator.EvalSpec, got {type(eval_spec).__name__}"
        )
    if serving_fns is None:
        serving_fns = {}
    if not isinstance(serving_fns, dict) or not all(
        isinstance(k, str) and k and "/" not in k and not k.startswith(".") and callable(v)
        for k, v in serving_fns.items()
    ):
        raise errors.InvalidTrialError(
            f"{name}.build_serving_input_receiver_fns() must return a dict of name -> "
            "serving_input_receiver_fn, each name a plain directory name (no '/'), got "
            f"{serving_fns!r}"
        )
    reserved = {"variables", "code", "eval"} & set(serving_fns)
    if reserved:
        raise errors.InvalidTrialError(
            f"serving_input_receiver_fn names {sorted(reserved)} are reserved for files of the checkpoint; "
            "choose other names"
        )
    return EstimatorParts(estimator, train_spec, eval_spec, dict(serving_fns))


def _accepted_args(fn: Callable[..., Any]) -> List[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _wrap_input_fn(
    input_fn: Callable[..., Any], what: str, transform: Callable[[Any], Any]
) -> Callable[..., Any]:
    """An input_fn for the Estimator that checks the user's returns a tf.data.Dataset, then transforms it."""
    accepted = _accepted_args(input_fn)

    def wrapped(mode: Any = None, params: Any = None, config: Any = None) -> Any:
        given = {"mode": mode, "params": params, "config": config}
        dataset = input_fn(**{k: v for k, v in given.items() if k in accepted})
        if not _is_dataset(dataset):
            raise errors.InvalidTrialError(
                f"the input_fn of the {what} returned {type(dataset).__name__}; EstimatorTrial supports only an "
                "input_fn that returns a tf.data.Dataset (of (features, labels) batches), not a tuple of "
                "features and labels: return e.g. tf.data.Dataset.from_tensor_slices((features, labels))"
                ".batch(batch_size)"
            )
        return transform(dataset)

    return wrapped


def rebuild_estimator(
    estimator: tf.estimator.Estimator, model_dir: str, seed: int, strategy: Any = None
) -> tf.estimator.Estimator:
    """The same model_fn, params and warm start, with Determined's model dir, seed and saving policy; with
    several slots, training distributed by `strategy` (the collective strategy of the trial's ranks)."""
    config = estimator.config
    if config.model_dir and config.model_dir != model_dir:
        logger.info("the Estimator's model_dir %s is replaced by the trial's own %s", config.model_dir, model_dir)
    if strategy is not None and config.train_distribute is not None:
        logger.info("the RunConfig's train_distribute is replaced by the trial's MultiWorkerMirroredStrategy")
    changes: Dict[str, Any] = {"train_distribute": strategy} if strategy is not None else {}
    config = config.replace(
        model_dir=model_dir,
        tf_random_seed=config.tf_random_seed if config.tf_random_seed is not None else seed,
        save_checkpoints_steps=_NEVER_STEPS,
        save_checkpoints_secs=None,
        **changes,
    )
    rebuilt = tf.estimator.Estimator(
        model_fn=estimator._model_fn,
        config=config,
        params=estimator.params or None,
        warm_start_from=getattr(estimator, "_warm_start_settings", None),
    )
    if strategy is not None:
        # Training sessions run on this rank's server of the trial's cluster; every rank initializes its
        # variables (the strategy broadcasts the chief's initial values) instead of waiting for a chief,
        # which would never come, as the ranks' initializers meet in collectives.
        rebuilt._config._master = det_tf.session_target(strategy)
        rebuilt._config._is_chief = True
    return rebuilt


def _plain(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.item() if value.size == 1 else value.tolist()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


class _BatchCounter(tf.estimator.SessionRunHook):
    """Counts the batches of one evaluation."""

    def __init__(self) -> None:
        self.batches = 0

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.batches += 1


def _combine_slots(per_slot: List[Any]) -> Dict[str, Any]:
    """The validation metrics of the slots as one: a metric every slot agrees on (a make_metric metric,
    already reduced across slots by its reducer) as it is; any other the mean over the slots weighted by
    the number of batches each evaluated (exact for a mean of per-batch values, such as `loss`)."""
    names: List[str] = []
    for metrics, _ in per_slot:
        names.extend(n for n in metrics if n not in names)
    combined: Dict[str, Any] = {}
    for name in names:
        values = [(metrics[name], batches) for metrics, batches in per_slot if name in metrics and batches]
        if not values:
            values = [(metrics[name], 1) for metrics, _ in per_slot if name in metrics]
        if all(v == values[0][0] for v, _ in values):
            combined[name] = values[0][0]
            continue
        try:
            weights = np.asarray([b for _, b in values], dtype=np.float64)
            stacked = np.asarray([v for v, _ in values], dtype=np.float64)
        except (TypeError, ValueError):
            combined[name] = values[0][0]  # not numeric: the chief's
            continue
        mean = np.tensordot(weights / weights.sum(), stacked, axes=1)
        combined[name] = float(mean) if np.ndim(mean) == 0 else mean.tolist()
    return combined


class _ControlHook(tf.estimator.SessionRunHook):
    """Counts batches and hands control to the controller between them."""

    def __init__(self, controller: "EstimatorTrialController") -> None:
        self._controller = controller
        self._started = False
        self._loss: Optional[tf.Tensor] = None
        self._saver: Any = None

    def begin(self) -> None:
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)
        self._loss = losses[-1] if losses else None  # the Estimator appends its EstimatorSpec.loss last
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_create_session(self, session: Any, coord: Any) -> None:
        savers = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)
        if not savers:
            raise errors.DeterminedError("the Estimator's training graph has no Saver to checkpoint it with")
        self._saver = savers[0]

    def before_run(self, run_context: Any) -> Any:
        if not self._started:
            self._started = True
            if not self._controller._on_session_start(self._session_saver(run_context)):
                raise _StopTraining()
        return tf.compat.v1.train.SessionRunArgs({"loss": self._loss} if self._loss is not None else {})

    def after_run(self, run_context: Any, run_values: Any) -> None:
        loss = (run_values.results or {}).get("loss")
        if not self._controller._on_batch_end(loss, self._session_saver(run_context)):
            run_context.request_stop()

    def _session_saver(self, run_context: Any) -> Callable[[str], str]:
        session = run_context.session

        def save(model_dir: str) -> str:
            step = int(session.run(self._global_step))
            prefix = self._saver.save(session, str(pathlib.Path(model_dir, "model.ckpt")), global_step=step)
            return str(prefix)

        return save


class EstimatorTrialController(HookLoop):
    """Trains, validates and checkpoints an EstimatorTrial as the searcher operations of its core context ask.

    For each operation: train up to `op.length` batches in total (batches = Estimator steps), report
    the training loss every `scheduling_unit` batches, validate when `min_validation_period` is due,
    checkpoint when `min_checkpoint_period` or `checkpoint_policy` says so; at the end of the operation
    validate, checkpoint if anything is unsaved, and report the searcher metric. Preemption is checked
    after every batch: the controller then checkpoints and returns.
    """

    context: EstimatorContext
    _logger = logger
    _broadcast_validation_was_best = True  # every rank saves the model dir (see _save_model_dir)

    def __init__(self, trial_class: Type[Any], context: EstimatorContext) -> None:
        super().__init__(trial_class, context)
        name = trial_class.__name__
        if not isinstance(context, EstimatorContext):
            raise errors.InvalidTrialError(
                f"{name} got a {type(context).__name__}; an EstimatorTrial needs an EstimatorTrialContext "
                "(leave trial_context_class as it is, or subclass EstimatorTrialContext)"
            )
        self._rank = context.distributed.rank
        self._size = context.distributed.size
        self._strategy = det_tf.current_strategy() if self._size > 1 else None
        if self._size > 1:
            det_tf.check_global_batch_size(context.get_hparams(), self._size)
            if self._strategy is None:
                raise errors.DeterminedError(
                    f"{name} runs on {self._size} slots but no distribution strategy was created: run it "
                    "through determined's execution (pre_execute_hook joins the ranks' TensorFlow cluster)"
                )
        self._read_config(context.get_experiment_config())
        # The trial's code runs with TF 1.x's graph-mode behaviour (placeholders, sessions), as seed 000 promises.
        with UserCodeGraph(context.get_trial_seed()).entered():
            self.trial = construct_trial(trial_class, context)
            parts = check_parts(
                name,
                self.trial.build_estimator(),
                self.trial.build_train_spec(),
                self.trial.build_validation_spec(),
                self.trial.build_serving_input_receiver_fns(),
            )
        if parts.train_spec.max_steps is not None:
            logger.info("TrainSpec.max_steps (%s) is ignored: the searcher decides how long to train",
                        parts.train_spec.max_steps)
        self._model_dir = tempfile.mkdtemp(prefix="det-estimator-model-")
        self.estimator = rebuild_estimator(parts.estimator, self._model_dir, context.get_trial_seed(), self._strategy)
        self.train_spec = parts.train_spec
        self.eval_spec = parts.eval_spec
        self.serving_fns = parts.serving_fns
        self.run_hooks: List[RunHook] = []
        for hook in list(parts.train_spec.hooks) + list(parts.eval_spec.hooks):
            if isinstance(hook, RunHook) and all(hook is not h for h in self.run_hooks):
                self.run_hooks.append(hook)

        # Saves the training session's state into a model dir: the control hook's, between two batches.
        self._save: Optional[Callable[[str], str]] = None
        self._saved: Optional[tuple] = None  # (steps_completed, TF checkpoint prefix) of the model dir's last save
        self._losses: List[float] = []

    # -- entry point ---------------------------------------------------------------------------------

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        """With several slots, join the ranks' TensorFlow cluster first (before TensorFlow runs anything);
        then seed TensorFlow and quiet its TF1 deprecation notices."""
        if distributed is not None and distributed.size > 1:
            with v1_behavior():
                det_tf.collective_strategy_v1(distributed)
        tf.random.set_seed(trial_seed)
        # TF1 APIs are what EstimatorTrials use: their deprecation notices and the Estimator's INFO lines
        # (its whole RunConfig, every 100 steps' loss) would drown the trial's logs.
        from tensorflow.python.util import deprecation

        deprecation._PRINT_DEPRECATION_WARNINGS = False
        tf.get_logger().setLevel(logging.WARNING)

    def run(self) -> None:
        try:
            with v1_behavior():
                self._restore()
                if self._start_operations():
                    self._train()
        finally:
            self._end_operations()
            for hook in self.run_hooks:
                hook.on_trial_close()
            shutil.rmtree(self._model_dir, ignore_errors=True)

    def _train(self) -> None:
        skip = self.steps_completed

        def transform(dataset: Any) -> Any:
            dataset = dataset.repeat()
            return dataset.skip(skip) if skip else dataset

        input_fn = _wrap_input_fn(self.train_spec.input_fn, "TrainSpec", transform)
        hooks = [_ControlHook(self)] + list(self.train_spec.hooks)
        try:
            self.estimator.train(
                input_fn=input_fn, hooks=hooks, saving_listeners=list(self.train_spec.saving_listeners or [])
            )
        except _StopTraining:
            pass

    # -- the control loop, between batches -----------------------------------------------------------

    def _on_session_start(self, save: Callable[[str], str]) -> bool:
        """Before the first batch: finish the operations that need no training; False when none is left."""
        self._save = save
        return self._before_first_batch()

    def _on_batch_end(self, loss: Any, save: Callable[[str], str]) -> bool:
        """Called after every batch; False when training must stop."""
        self._save = save
        if loss is not None:
            self._losses.append(float(loss))
        return self._batch_trained()

    def _unreported_batches(self) -> int:
        return len(self._losses)

    def _report_training_metrics(self) -> None:
        if not self._losses:
            return
        losses, self._losses = self._losses, []
        if self._size > 1 and self._average_training_metrics:
            # Every rank trained the same batches: per batch, the mean of the ranks' losses.
            gathered = self.context.distributed.gather(losses)
            if gathered is None:
                return
            losses = [float(np.mean(per_rank)) for per_rank in zip(*gathered)]
        batch_metrics = [{"loss": v} for v in losses]
        self.core.train.report_training_metrics(
            self.steps_completed, {"loss": float(np.mean(losses))}, batch_metrics
        )

    def _missing_searcher_metric(self, name: str, metrics: Dict[str, Any]) -> str:
        return (
            f"the validation metrics lack the searcher metric {name!r} (searcher.metric); Estimator.evaluate "
            f"returned: {', '.join(sorted(metrics)) or 'no metrics'}. Add {name!r} to the eval_metric_ops "
            "of the EstimatorSpec (or use 'loss'), or change searcher.metric"
        )

    # -- saving, validation, checkpoints -------------------------------------------------------------

    def _save_model_dir(self) -> str:
        if self._saved is None or self._saved[0] != self.steps_completed:
            assert self._save is not None, "the model dir is saved only between batches, from the control hook"
            self._saved = (self.steps_completed, self._save(self._model_dir))
        return self._saved[1]

    def _validate(self) -> Dict[str, Any]:
        prefix = self._save_model_dir()
        spec = self.eval_spec
        input_fn = _wrap_input_fn(spec.input_fn, "EvalSpec", lambda dataset: dataset)
        counter = _BatchCounter()
        results = self.estimator.evaluate(
            input_fn=input_fn, steps=spec.steps, hooks=list(spec.hooks) + [counter], checkpoint_path=prefix,
            name=spec.name,
        )
        metrics = {k: _plain(v) for k, v in results.items() if k != tf.compat.v1.GraphKeys.GLOBAL_STEP}
        if self._size > 1:
            metrics = _combine_slots(self.context.distributed.allgather((metrics, counter.batches)))
        for name, value in metrics.items():
            if isinstance(value, float) and not math.isfinite(value):
                logger.warning("validation metric %s is %s after %d batches", name, value, self.steps_completed)
        self._validated(metrics)
        return metrics

    def _checkpoint(self) -> None:
        prefix = self._save_model_dir()
        if self._rank == 0:
            metadata = self._checkpoint_metadata(_checkpoint.framework(), _checkpoint.FORMAT)
            with self.core.checkpoint.store_path(metadata) as (path, _uuid):
                _checkpoint.copy_training_state(prefix, path)
                _checkpoint.export_serving_models(self.estimator, self.serving_fns, prefix, path)
                _checkpoint.write_load_data(path, {
                    "trial_type": "EstimatorTrial",
                    "framework": _checkpoint.framework(),
                    "format": _checkpoint.FORMAT,
                    "serving_input_receiver_fns": sorted(self.serving_fns),
                    "steps_completed": self.steps_completed,
                    "hparams": self.context.get_hparams(),
                })
                for hook in self.run_hooks:
                    hook.on_checkpoint_end(str(path))
        self._last_checkpoint = self.steps_completed

    def _restore(self) -> None:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            return
        with self.core.checkpoint.restore_path(uuid) as path:
            name = _checkpoint.restore_training_state(pathlib.Path(path), pathlib.Path(self._model_dir))
            for hook in self.run_hooks:
                hook.on_checkpoint_load(str(path))
        # The Estimator's global step continues from the checkpoint, warm start or not.
        self._resume_at_platform_steps(None)
        logger.info("restored checkpoint %s (%s) at %d batches", uuid, name, self.steps_completed)
