"""The Native API (create, create_trial_instance) and the client SDK (Determined and the objects it returns).

`det.experimental.keras` and `det.experimental.estimator` (the Native APIs of tf.keras and tf.estimator) are
imported on first use, so that `import determined` imports no TensorFlow.
"""
import importlib
from typing import Any

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


_FRAMEWORK_SUBMODULES = ("keras", "estimator")


def __getattr__(name: str) -> Any:
    if name in _FRAMEWORK_SUBMODULES:
        return importlib.import_module(f"determined.experimental.{name}")
    raise AttributeError(f"module 'determined.experimental' has no attribute {name!r}")
