"""The client SDK of seed 002: Determined, ExperimentReference, TrialReference, Checkpoint, Model; Workspace and
Project (0.38), and module functions that drive a default `Determined`."""
from typing import List, Optional

from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import UsageError
from determined.experimental.client._determined import Determined
from determined.experimental.client._experiment import ExperimentReference
from determined.experimental.client._model import Model, ModelOrderBy, ModelSortBy
from determined.experimental.client._trial import TrialReference
from determined.experimental.client._workspace import Project, Workspace

__all__ = [
    "Checkpoint",
    "Determined",
    "ExperimentReference",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "Project",
    "TrialReference",
    "UsageError",
    "Workspace",
    "create_workspace",
    "delete_workspace",
    "get_workspace",
    "list_workspaces",
]

_default: Optional[Determined] = None


def _client() -> Determined:
    global _default
    if _default is None:
        _default = Determined()
    return _default


def create_workspace(name: str) -> Workspace:
    return _client().create_workspace(name)


def get_workspace(name: str) -> Workspace:
    return _client().get_workspace(name)


def list_workspaces() -> List[Workspace]:
    return _client().list_workspaces()


def delete_workspace(name: str) -> None:
    _client().delete_workspace(name)
