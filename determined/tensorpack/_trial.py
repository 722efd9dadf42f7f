"""TensorpackTrial (Determined 0.12/0.13) and the names its trials import: Evaluator, NamedTensorsEvaluator,
SchedulePoint, ScheduleSetter and the TFEventWriter monitor."""
import abc
import logging
import pathlib
from typing import Any, Dict, List, Optional, Sequence, Union

import tensorpack as tp

from determined import errors
from determined._trial import Trial
from determined._trial_context import TrialContext
from determined.tensorpack._find_tensor import find_tensor

logger = logging.getLogger("determined.tensorpack")


class Evaluator(tp.Callback):  # type: ignore[misc]
    """Computes the validation metrics of a TensorpackTrial with any Python code: return one from
    ``TensorpackTrial.validation_metrics()``. ``set_up_graph(trainer)`` is called while the training graph is
    built (create the tensors or predictors it needs there); ``compute_validation_metrics()`` at every
    validation, in the training session (``trainer.sess``), returns ``{name: value}``."""

    _chief_only = False

    @abc.abstractmethod
    def set_up_graph(self, trainer: tp.Trainer) -> None:
        """Add what the validation needs to the graph (before it is finalized)."""

    @abc.abstractmethod
    def compute_validation_metrics(self) -> Dict[str, Any]:
        """The validation metrics, ``{name: value}``."""


class NamedTensorsEvaluator(Evaluator):
    """Validation metrics that are the values of named tensors of the training graph (no input needed: variables,
    moving averages), read in the training session at each validation."""

    def __init__(self, names: List[str]) -> None:
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
            raise errors.InvalidTrialError(f"NamedTensorsEvaluator takes a non-empty list of tensor names, got {names!r}")
        self.names = list(names)
        self._tensors: Dict[str, Any] = {}
        self._trainer: Any = None

    def set_up_graph(self, trainer: tp.Trainer) -> None:
        self._trainer = trainer
        self._tensors = {name: find_tensor(trainer, name, "NamedTensorsEvaluator") for name in self.names}

    def compute_validation_metrics(self) -> Dict[str, Any]:
        return dict(self._trainer.sess.run(self._tensors))


class TensorpackTrial(Trial):
    """Tensorpack trials are created by subclassing this class: a ``tensorpack.ModelDesc``, the dataflows, and
    the tensors to report. Determined drives ``tensorpack``'s own training loop (TF 1.x graph mode, on
    ``tf.compat.v1``): it reports the training metrics, validates, checkpoints and stops as the experiment's
    searcher says. One Tensorpack epoch is ``scheduling_unit`` batches."""

    trial_context_class = TrialContext

    def __init__(self, context: TrialContext) -> None:
        self.context = context

    @abc.abstractmethod
    def build_model(self, trainer_type: str) -> tp.ModelDesc:
        """Returns the Tensorpack ModelDesc describing the model (``trainer_type`` is ``"replicated"``)."""

    def training_metrics(self) -> List[str]:
        """Returns a list of names of tensors to use as training metrics in addition to the loss."""
        return []

    @abc.abstractmethod
    def validation_metrics(self) -> Union[List[str], Evaluator]:
        """Returns either an Evaluator object that computes the validation metrics or a list of tensor names:
        each averaged over the batches of ``build_validation_dataflow()`` and reported as ``val_<name>``."""

    @abc.abstractmethod
    def build_training_dataflow(self) -> tp.DataFlow:
        """Returns the tp.DataFlow to use for training (of batches; it is repeated)."""

    def build_validation_dataflow(self) -> Optional[tp.DataFlow]:
        """Optionally returns the tp.DataFlow to use for validation (needed when validation_metrics() gives names)."""
        return None

    def tensorpack_callbacks(self) -> List[tp.Callback]:
        """Returns a list of Tensorpack callbacks to use during training."""
        return []

    def tensorpack_monitors(self) -> List[tp.MonitorBase]:
        """Returns a list of Tensorpack monitors to use during training."""
        return []

    def load_backbone_weights(self) -> Optional[str]:
        """Returns the path of weights (a TF checkpoint or an .npz of variables) to start from when the trial
        starts from scratch."""
        return None


class SchedulePoint:
    """A point of a ScheduleSetter's schedule: from global step ``point`` on, the value ``value``, held
    (``interp=None``) or moving linearly to the next point's value (``interp="linear"``)."""

    def __init__(self, point: int, value: float, interp: Optional[str] = None) -> None:
        if interp not in (None, "linear"):
            raise errors.InvalidTrialError(f"SchedulePoint interp must be None or 'linear', got {interp!r}")
        self.point = int(point)
        self.value = float(value)
        self.interp = interp

    def __repr__(self) -> str:
        return f"SchedulePoint(point={self.point}, value={self.value}, interp={self.interp})"


def schedule_value(schedule: Sequence[SchedulePoint], step: int) -> float:
    """The value of `schedule` at global step `step`."""
    for here, following in zip(schedule, schedule[1:]):
        if here.point <= step < following.point:
            if here.interp == "linear":
                fraction = (step - here.point) / (following.point - here.point)
                return here.value + (following.value - here.value) * fraction
            return here.value
    return schedule[-1].value if step >= schedule[-1].point else schedule[0].value


class ScheduleSetter(tp.callbacks.HyperParamSetter):  # type: ignore[misc]
    """Sets a hyperparameter (e.g. ``"learning_rate"``, a variable of the graph) at every step from a schedule of
    SchedulePoints over the global step; right after a resume too, since the value depends on the step only."""

    def __init__(self, param: Any, schedule: List[SchedulePoint]) -> None:
        if not schedule or not all(isinstance(p, SchedulePoint) for p in schedule):
            raise errors.InvalidTrialError("ScheduleSetter takes a non-empty list of SchedulePoint")
        if [p.point for p in schedule] != sorted(p.point for p in schedule):
            raise errors.InvalidTrialError(f"the points of a ScheduleSetter's schedule must increase: {schedule}")
        super().__init__(param)
        self.schedule = list(schedule)

    def _get_value_to_set(self) -> float:
        return schedule_value(self.schedule, int(self.global_step))

    def _trigger_step(self) -> None:
        self.trigger()

    def _trigger_epoch(self) -> None:
        pass


class TFEventWriter(tp.TFEventWriter):  # type: ignore[misc]
    """Tensorpack's TFEventWriter monitor, writing into the trial's TensorBoard directory (its run
    ``trial_<id>/tensorpack`` in ``det tensorboard start``); a ``logdir`` given is ignored."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return object.__new__(cls)  # tensorpack's own __new__ turns a writer without a logdir into a no-op

    def __init__(self, logdir: Optional[str] = None, max_queue: int = 10, flush_secs: int = 120,
                 split_files: bool = False) -> None:
        from determined import tensorboard

        if logdir is not None:
            logger.warning("TFEventWriter(logdir=%r): logdir is ignored; it writes into the trial's TensorBoard "
                           "directory", logdir)
        directory = tensorboard.get_base_path() / "tensorpack"
        directory.mkdir(parents=True, exist_ok=True)
        super().__init__(str(directory), max_queue=max_queue, flush_secs=flush_secs, split_files=split_files)

    def write_into(self, trial_directory: pathlib.Path) -> None:
        """Write into `trial_directory` (the TensorBoard directory of the trial that runs this monitor)."""
        directory = trial_directory / "tensorpack"
        directory.mkdir(parents=True, exist_ok=True)
        self._logdir = str(directory)
