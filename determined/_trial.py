"""The Trial base class and the base of the framework controllers that drive it."""
import abc
from typing import Any, Optional, Type

from determined import core
from determined._trial_context import TrialContext


class TrialController(abc.ABC):
    """Drives one Trial class with a core context: a framework (PyTorch, Keras, ...) subclasses it.

    `run()` works through `context.core.searcher.operations()`, reports metrics and checkpoints through
    the core context, restores from `context.core.info.latest_checkpoint`, and returns when the searcher
    has no more work or the trial is preempted (after a checkpoint).
    """

    def __init__(self, trial_class: Type["Trial"], context: TrialContext) -> None:
        self.trial_class = trial_class
        self.context = context
        self.core: core.Context = context.core

    @classmethod
    def pre_execute_hook(cls, trial_seed: int, distributed: core.DistributedContext) -> None:
        """Called before the TrialContext and the user's Trial are built: a framework seeds its own RNGs
        (python's and numpy's are seeded already) and sets up its device/process group here."""

    @abc.abstractmethod
    def run(self) -> None:
        """Train, validate and checkpoint as the searcher asks, until there is no more work or preemption."""


class Trial(abc.ABC):
    """Base class of every Trial API (PyTorchTrial, TFKerasTrial, EstimatorTrial, ...).

    `trial_context_class` is the context class its constructor receives; `trial_controller_class` the
    controller that drives it.
    """

    trial_context_class: Type[TrialContext] = TrialContext
    trial_controller_class: Optional[Type[TrialController]] = None

    def __init__(self, context: Any) -> None:
        """Build the trial from its context (subclasses usually keep it as `self.context`)."""
        self.context = context
