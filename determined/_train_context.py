"""The module path that seed 004 names for TrialContext (`determined._train_context.TrialContext`)."""
from determined._trial_context import TrialContext

__all__ = ["TrialContext"]
