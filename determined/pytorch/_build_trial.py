"""Building a PyTorchTrial from its class and context, checked to have wrapped a model and an optimizer."""
from typing import Any, Dict, Optional, Type

from determined import errors
from determined._trial import construct_trial
from determined.pytorch import _trial
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._lr_scheduler import LRScheduler


def instantiate_trial(
    trial_class: Type[Any], context: PyTorchTrialContext, trial_kwargs: Optional[Dict[str, Any]] = None
) -> Any:
    """Build the user's trial; for the 0.12 API also its model, optimizer and LR scheduler (wrapped)."""
    if not isinstance(context, PyTorchTrialContext):
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} got a {type(context).__name__}; a PyTorchTrial needs a PyTorchTrialContext "
            "(leave trial_context_class as it is, or subclass PyTorchTrialContext)"
        )
    trial = construct_trial(trial_class, context, **(trial_kwargs or {}))
    if _trial.uses_old_api(trial_class) and (_trial.builds_its_model(trial_class) or not context.models):
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
    check_registered(trial_class, context)
    return trial


def check_registered(trial_class: Type[Any], context: PyTorchTrialContext) -> None:
    """The trial must have wrapped at least one model and one optimizer."""
    if not context.models or not context.optimizers:
        raise errors.InvalidTrialError(
            f"{trial_class.__name__} registered {len(context.models)} model(s) and {len(context.optimizers)} "
            "optimizer(s): create them in __init__ with self.model = context.wrap_model(...) and "
            "self.opt = context.wrap_optimizer(...)"
        )
