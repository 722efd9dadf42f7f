"""The Trial base class and the base of the framework controllers that drive it."""
import abc
import inspect
from typing import Any, Dict, Optional, Type

from determined import core, errors
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


def construct_trial(trial_class: Type[Any], context: TrialContext, **kwargs: Any) -> Any:
    """`trial_class(context, **kwargs)`, as every Trial API builds the user's trial.

    A constructor with a required `hparams` parameter that `kwargs` do not give (the Trainer-era
    ``__init__(self, context, hparams)``) gets the trial's hyperparameters. A TypeError out of the constructor (a
    signature that does not take what is passed, or a TypeError in the trial's own ``__init__`` code) fails the
    same way on every restart: it becomes an InvalidTrialError, which ends the trial instead of retrying it.
    """
    if _requires(trial_class, "hparams") and "hparams" not in kwargs:
        kwargs["hparams"] = context.get_hparams()
    try:
        return trial_class(context, **kwargs)
    except TypeError as e:
        given = "".join(f", {name}=..." for name in kwargs)
        raise errors.InvalidTrialError(
            f"{trial_class.__name__}(context{given}) raised TypeError: {e}. A Trial's __init__ takes the trial "
            "context as its only required argument; fix the constructor or the code in it"
        ) from e


def _requires(trial_class: Type[Any], name: str) -> bool:
    try:
        parameters: Dict[str, inspect.Parameter] = dict(inspect.signature(trial_class.__init__).parameters)
    except (TypeError, ValueError):
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.default is inspect.Parameter.empty and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    )
