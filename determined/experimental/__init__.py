"""The Native API (create, create_trial_instance) and the client SDK (Determined and the objects it returns)."""
from determined.experimental._native import Mode, create, create_trial_instance
from determined.experimental.client import (
    Checkpoint,
    Determined,
    ExperimentReference,
    Model,
    ModelOrderBy,
    ModelSortBy,
    TrialReference,
)

__all__ = [
    "Checkpoint",
    "Determined",
    "ExperimentReference",
    "Model",
    "Mode",
    "ModelOrderBy",
    "ModelSortBy",
    "TrialReference",
    "create",
    "create_trial_instance",
]
