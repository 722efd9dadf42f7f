"""LRScheduler: a torch learning-rate scheduler plus when Determined steps it."""
import enum
from typing import Any, Dict, List

from determined import errors


class LRSchedulerStepMode(enum.Enum):
    """Specifies when and how scheduler.step() should be executed."""

    STEP_EVERY_EPOCH = 1
    STEP_EVERY_BATCH = 2
    MANUAL_STEP = 3
    STEP_EVERY_OPTIMIZER_STEP = 4


class LRScheduler:
    """Wrapper for a PyTorch LRScheduler.

    Usage of this wrapper is required to properly schedule the optimizer's learning rate. It saves and
    restores the scheduler's state with every checkpoint, and steps the scheduler at the frequency chosen:

    * ``STEP_EVERY_EPOCH``: Determined calls ``scheduler.step()`` after every `frequency` training epochs, with no
      arguments;
    * ``STEP_EVERY_BATCH``: Determined calls ``scheduler.step()`` after every `frequency` training batches, with no
      arguments (with optimizations.aggregation_frequency > 1, on the batches that step the optimizer);
    * ``STEP_EVERY_OPTIMIZER_STEP`` (0.17+): after every `frequency` optimizer steps;
    * ``MANUAL_STEP``: Determined never calls ``scheduler.step()``; the trial does, with any arguments.
    """

    StepMode = LRSchedulerStepMode

    def __init__(self, scheduler: Any, step_mode: LRSchedulerStepMode, frequency: int = 1) -> None:
        if not callable(getattr(scheduler, "step", None)) or not callable(getattr(scheduler, "state_dict", None)):
            raise errors.InvalidTrialError(
                f"LRScheduler needs a torch learning-rate scheduler (torch.optim.lr_scheduler.*), got "
                f"{type(scheduler).__name__}"
            )
        if not isinstance(step_mode, LRSchedulerStepMode):
            raise errors.InvalidTrialError(
                f"LRScheduler step_mode must be det.pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH, "
                f"STEP_EVERY_BATCH, STEP_EVERY_OPTIMIZER_STEP or MANUAL_STEP, got {step_mode!r}"
            )
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise errors.InvalidTrialError(f"LRScheduler frequency must be an int >= 1, got {frequency!r}")
        self._scheduler = scheduler
        self._step_mode = step_mode
        self._frequency = frequency

    @property
    def scheduler(self) -> Any:
        """The wrapped torch scheduler."""
        return self._scheduler

    @property
    def step_mode(self) -> LRSchedulerStepMode:
        return self._step_mode

    def get_lr(self) -> List:
        """Compute the current learning rate of the scheduler.

        This function is equivalent to calling get_lr() on the wrapped LRScheduler (its last computed rates).
        """
        return self.get_last_lr()

    def get_last_lr(self) -> List:
        """The learning rates the wrapped scheduler computed last (one per parameter group), as
        ``torch.optim.lr_scheduler.LRScheduler.get_last_lr()``."""
        last = getattr(self._scheduler, "get_last_lr", None)
        return list(last()) if callable(last) else list(self._scheduler.get_lr())

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Call step() on the wrapped LRScheduler instance."""
        self._scheduler.step(*args, **kwargs)

    def state_dict(self) -> Dict[str, Any]:
        return self._scheduler.state_dict()

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self._scheduler.load_state_dict(state_dict)

    def should_step_after_batch(self, batch_idx: int, epoch_len: int, aggregation_frequency: int) -> bool:
        """Whether Determined steps the scheduler after the (update) batch `batch_idx`.

        With gradient aggregation only batches that step the optimizer are asked; the epoch mode then
        steps at the first update batch of each new epoch.
        """
        if self._step_mode is LRSchedulerStepMode.STEP_EVERY_BATCH:
            # One of the batches since the last update batch is a multiple of `frequency`.
            return (batch_idx + 1) % self._frequency < aggregation_frequency
        if self._step_mode is LRSchedulerStepMode.STEP_EVERY_OPTIMIZER_STEP:
            return ((batch_idx + 1) // aggregation_frequency) % self._frequency == 0
        if self._step_mode is LRSchedulerStepMode.STEP_EVERY_EPOCH:
            return (batch_idx + 1) % epoch_len < aggregation_frequency and (
                (batch_idx + 1) // epoch_len) % self._frequency == 0
        return False

