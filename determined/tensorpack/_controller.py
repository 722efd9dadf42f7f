"""TensorpackTrialController: drives Tensorpack's own training loop through the searcher operations of a core context.

Tensorpack trains in one long call (`Trainer.train_with_defaults`). The controller builds the trial's graph in a
graph of its own (TF 1.x behaviour, as Determined 0.12/0.13 ran it on TF 1.15) and hands Tensorpack a last
callback, `_ControlCallback`, which fetches the loss and the trial's training metrics with every batch and, between
two batches, does what the platform asks (report, validate, checkpoint, finish searcher operations) and stops the
training (`StopTraining`) when there is no more work or the trial is preempted.
"""
import json
import logging
import pathlib
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Type

import numpy as np
import tensorflow as tf
import tensorpack as tp
from tensorpack.train.base import StopTraining

from determined import errors
from determined._trial import construct_trial
from determined._trial_context import TrialContext
from determined._trial_loop import HookLoop
from determined.tensorflow._tf1_compat import v1_behavior
from determined.tensorpack._find_tensor import find_tensor
from determined.tensorpack._trial import Evaluator, TensorpackTrial, TFEventWriter

logger = logging.getLogger("determined.tensorpack")

CHECKPOINT_PREFIX = "model"
FORMAT = "tensorpack"
VALIDATION_PREFIX = "val"
_MANY_EPOCHS = 2**40


def framework() -> str:
    return f"tensorflow-{tf.__version__}"


def _plain(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.item() if value.size == 1 else value.tolist()
    return value


class _ValidationStats(tp.ScalarStats):  # type: ignore[misc]
    """tp.ScalarStats (each tensor averaged over the validation batches, named `val_<name>`) that keeps its last
    result for the controller."""

    def __init__(self, names: List[str]) -> None:
        super().__init__(names, prefix=VALIDATION_PREFIX)
        self.last: Dict[str, Any] = {}

    def _after_inference(self) -> Dict[str, Any]:
        self.last = dict(super()._after_inference() or {})
        return self.last


class _ValidationRunner(tp.InferenceRunner):  # type: ignore[misc]
    """A tp.InferenceRunner that runs when the controller validates, not at every Tensorpack epoch."""

    _chief_only = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._asked = False

    def _trigger(self) -> None:
        if self._asked:
            super()._trigger()

    def run(self) -> None:
        self._asked = True
        try:
            self.trigger()
        finally:
            self._asked = False


class _ControlCallback(tp.Callback):  # type: ignore[misc]
    """The last callback of the training: the controller's hands in Tensorpack's loop."""

    _chief_only = False

    def __init__(self, controller: "TensorpackTrialController") -> None:
        self._controller = controller

    def _setup_graph(self) -> None:
        self._controller._setup_graph(self.trainer)

    def _before_train(self) -> None:
        if not self._controller._before_first_batch():
            raise StopTraining()

    def _before_run(self, _: Any) -> Any:
        return tf.compat.v1.train.SessionRunArgs(fetches=self._controller._fetches)

    def _after_run(self, _: Any, run_values: Any) -> None:
        self._controller._batch_metrics.append({k: float(np.mean(v)) for k, v in run_values.results.items()})

    def _trigger_step(self) -> None:
        if not self._controller._batch_trained():
            raise StopTraining()


class TensorpackTrialController(HookLoop):
    """Trains, validates and checkpoints a TensorpackTrial as the searcher operations of its core context ask.

    One batch is one Tensorpack step, one Tensorpack epoch `scheduling_unit` batches. The training metrics are
    `loss` (the cost build_graph returns) and the trial's training_metrics() tensors; the validation metrics
    its validation_metrics() (`val_<name>` for tensor names). A checkpoint holds the graph's variables
    (`model-<batches>.*`); after a restart the training dataflow starts again from its beginning.
    """

    _logger = logger

    def __init__(self, trial_class: Type[Any], context: TrialContext) -> None:
        super().__init__(trial_class, context)
        name = trial_class.__name__
        if context.distributed.size > 1:
            raise errors.InvalidTrialError(
                f"{name} runs on {context.distributed.size} slots, but a TensorpackTrial trains on one slot here "
                "(Tensorpack trains across processes with Horovod, which this platform does not run): set "
                "resources.slots_per_trial to 1"
            )
        self._read_config(context.get_experiment_config())
        self._graph = tf.Graph()
        self._batch_metrics: List[Dict[str, float]] = []
        self._fetches: Dict[str, Any] = {}
        self._saver: Any = None
        self._restore_dir: Optional[pathlib.Path] = None
        with self._graph.as_default(), v1_behavior():
            tf.compat.v1.set_random_seed(context.get_trial_seed())
            self.trial = construct_trial(trial_class, context)
            if not isinstance(self.trial, TensorpackTrial):
                raise errors.InvalidTrialError(f"{name} is not a TensorpackTrial")
            training = self.trial.build_training_dataflow()
            if not isinstance(training, tp.DataFlow):
                raise errors.InvalidTrialError(
                    f"{name}.build_training_dataflow() must return a tensorpack DataFlow, got {type(training).__name__}"
                )
            validation = self.trial.validation_metrics()
            self._evaluator: Optional[Evaluator] = None
            self._runner: Optional[_ValidationRunner] = None
            self._stats: Optional[_ValidationStats] = None
            if isinstance(validation, Evaluator):
                self._evaluator = validation
            elif isinstance(validation, (list, tuple)) and validation and all(isinstance(v, str) for v in validation):
                dataflow = self.trial.build_validation_dataflow()
                if not isinstance(dataflow, tp.DataFlow):
                    raise errors.InvalidTrialError(
                        f"{name}.validation_metrics() names tensors, so build_validation_dataflow() must return the "
                        f"tensorpack DataFlow to compute them on, got {type(dataflow).__name__}"
                    )
                self._stats = _ValidationStats(list(validation))
                self._runner = _ValidationRunner(dataflow, [self._stats])
            else:
                raise errors.InvalidTrialError(
                    f"{name}.validation_metrics() must return a list of tensor names or a "
                    f"determined.tensorpack.Evaluator, got {validation!r}"
                )
            model = self.trial.build_model("replicated")
            if not isinstance(model, tp.ModelDesc):
                raise errors.InvalidTrialError(
                    f"{name}.build_model() must return a tensorpack ModelDesc, got {type(model).__name__}"
                )
            self.trainer = tp.SimpleTrainer()
            self.trainer.setup_graph(
                model.get_input_signature(), tp.QueueInput(training), model.build_graph, model.get_optimizer
            )

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: Any) -> None:
        tp.utils.fix_rng_seed(trial_seed % 2**32)

    # -- the graph ----------------------------------------------------------------------------------

    def _setup_graph(self, trainer: Any) -> None:
        """Called by the control callback while Tensorpack sets up its callbacks' graphs."""
        name = self.trial_class.__name__
        loss = trainer.towers.training()[0].output
        self._fetches = {"loss": loss}
        for metric in self.trial.training_metrics():
            self._fetches[metric] = find_tensor(trainer, metric, f"{name}.training_metrics()")
        if self._evaluator is not None:
            self._evaluator.set_up_graph(trainer)
        self._saver = tf.compat.v1.train.Saver(max_to_keep=None, save_relative_paths=True)

    # -- entry point --------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            with self._graph.as_default(), v1_behavior():
                session_init = self._session_init()
                if not self._start_operations():
                    return
                callbacks: List[Any] = []
                if self._runner is not None:
                    callbacks.append(self._runner)
                callbacks += list(self.trial.tensorpack_callbacks())
                callbacks += [tp.MovingAverageSummary(), tp.MergeAllSummaries(), tp.RunUpdateOps()]
                callbacks.append(_ControlCallback(self))
                starting_epoch = self.steps_completed // self._scheduling_unit + 1
                monitors = list(self.trial.tensorpack_monitors())
                for monitor in monitors:
                    if isinstance(monitor, TFEventWriter):  # this trial's directory, whatever it was made with
                        monitor.write_into(self.core.train.get_tensorboard_path())
                self.trainer.train_with_defaults(
                    callbacks=callbacks,
                    monitors=monitors,
                    session_init=session_init,
                    steps_per_epoch=self._scheduling_unit,
                    starting_epoch=starting_epoch,
                    max_epoch=starting_epoch + _MANY_EPOCHS,
                    extra_callbacks=[],
                )
        finally:
            self._end_operations()
            if self._restore_dir is not None:
                shutil.rmtree(self._restore_dir, ignore_errors=True)

    def _session_init(self) -> Any:
        uuid = self.core.info.latest_checkpoint
        if uuid is None:
            backbone = self.trial.load_backbone_weights()
            if backbone:
                logger.info("starting from the backbone weights %s", backbone)
                return tp.get_model_loader(str(backbone))
            return None
        # A copy: the storage's restore path may not outlive this call, and Tensorpack restores when it starts.
        self._restore_dir = pathlib.Path(tempfile.mkdtemp(prefix="det-tensorpack-restore-"))
        with self.core.checkpoint.restore_path(uuid) as path:
            for item in pathlib.Path(path).iterdir():
                if item.is_file() and (item.name.startswith(CHECKPOINT_PREFIX + "-") or item.name == "checkpoint"):
                    shutil.copy2(item, self._restore_dir / item.name)
        prefix = tf.train.latest_checkpoint(str(self._restore_dir))
        if prefix is None:
            raise errors.DeterminedError(f"checkpoint {uuid} holds no Tensorpack (TensorFlow) checkpoint files")
        self._resume_at_platform_steps(None)
        logger.info("restoring checkpoint %s at %d batches", uuid, self.steps_completed)
        return tp.SaverRestore(prefix)

    # -- what TrialLoop asks ------------------------------------------------------------------------

    def _unreported_batches(self) -> int:
        return len(self._batch_metrics)

    def _report_training_metrics(self) -> None:
        if not self._batch_metrics:
            return
        batches, self._batch_metrics = self._batch_metrics, []
        averages = {name: float(np.mean([b[name] for b in batches])) for name in batches[0]}
        self.core.train.report_training_metrics(self.steps_completed, averages, batches)

    def _validate(self) -> Dict[str, Any]:
        if self._evaluator is not None:
            metrics = self._evaluator.compute_validation_metrics()
            if not isinstance(metrics, dict):
                raise errors.InvalidTrialError(
                    f"{type(self._evaluator).__name__}.compute_validation_metrics() must return a dict of metrics, "
                    f"got {type(metrics).__name__}"
                )
        else:
            assert self._runner is not None and self._stats is not None
            self._runner.run()
            metrics = self._stats.last
        metrics = {str(k): _plain(v) for k, v in metrics.items()}
        self._validated(metrics)
        return metrics

    def _missing_searcher_metric(self, name: str, metrics: Dict[str, Any]) -> str:
        hint = ""
        if f"{VALIDATION_PREFIX}_{name}" in metrics:
            hint = f" (the validation metrics of tensor names are prefixed: use searcher.metric: val_{name})"
        return (
            f"the validation metrics lack the searcher metric {name!r} (searcher.metric){hint}; validation gave: "
            f"{', '.join(sorted(metrics)) or 'no metrics'}"
        )

    def _checkpoint(self) -> None:
        metadata = self._checkpoint_metadata(framework(), FORMAT)
        with self.core.checkpoint.store_path(metadata) as (path, _uuid):
            self._saver.save(self.trainer.sess, str(path / CHECKPOINT_PREFIX), global_step=self.steps_completed)
            load_data = {"trial_type": "TensorpackTrial", "format": FORMAT, "framework": framework(),
                         "steps_completed": self.steps_completed, "hparams": self.context.get_hparams()}
            (path / "load_data.json").write_text(json.dumps(load_data, indent=2, default=str))
        self._last_checkpoint = self.steps_completed
