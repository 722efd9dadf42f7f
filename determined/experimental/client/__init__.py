"""The client SDK of seed 002: Determined, ExperimentReference, TrialReference, Checkpoint, Model."""
from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import UsageError
from determined.experimental.client._determined import Determined
from determined.experimental.client._experiment import ExperimentReference
from determined.experimental.client._model import Model, ModelOrderBy, ModelSortBy
from determined.experimental.client._trial import TrialReference

__all__ = [
    "Checkpoint",
    "Determined",
    "ExperimentReference",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "TrialReference",
    "UsageError",
]
