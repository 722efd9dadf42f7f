"""The client SDK: `Determined` and the objects it returns (0.38), and the module functions that drive a default
`Determined` session (`client.login()` once, before anything else, or implicitly on first use).

`determined.experimental.Determined`/`.Model` are the 0.13 faces of seed 002 (client/_legacy.py);
`ExperimentReference` and `TrialReference` are the 0.13 names of `Experiment` and `Trial`.

The names are imported on first use (`from determined.experimental.client import Determined` works as ever), so that
a module that needs one part of the client (a CLI command, the foreground run, core_v2) does not import the rest.
"""
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union  # noqa: F401 (names of the package, as ever)

from determined.common.lazy import lazy_attributes as _lazy_attributes

# The Determined of the module functions (client/_functions.py): set by `login()`, else by their first call.
_default: Optional[Any] = None

_LAZY = {
    "Checkpoint": "determined.experimental.client._checkpoint",
    "CheckpointSortBy": "determined.experimental.client._enums",
    "CheckpointState": "determined.experimental.client._enums",
    "CheckpointTrainingMetadata": "determined.experimental.client._checkpoint",
    "Determined": "determined.experimental.client._determined",
    "DownloadMode": "determined.experimental.client._enums",
    "Experiment": "determined.experimental.client._experiment",
    "ExperimentReference": "determined.experimental.client._experiment",
    "ExperimentSortBy": "determined.experimental.client._enums",
    "ExperimentState": "determined.experimental.client._enums",
    "Model": "determined.experimental.client._model",
    "ModelOrderBy": "determined.experimental.client._model",
    "ModelSortBy": "determined.experimental.client._enums",
    "ModelVersion": "determined.experimental.client._model",
    "OrderBy": "determined.experimental.client._enums",
    "Project": "determined.experimental.client._workspace",
    "TrainingMetrics": "determined.experimental.client._metrics",
    "Trial": "determined.experimental.client._trial",
    "TrialMetrics": "determined.experimental.client._metrics",
    "TrialReference": "determined.experimental.client._trial",
    "TrialSortBy": "determined.experimental.client._enums",
    "TrialState": "determined.experimental.client._enums",
    "UsageError": "determined.experimental.client._common",
    "User": "determined.experimental.client._user",
    "ValidationMetrics": "determined.experimental.client._metrics",
    "Workspace": "determined.experimental.client._workspace",
    "create_experiment": "determined.experimental.client._functions",
    "create_model": "determined.experimental.client._functions",
    "create_user": "determined.experimental.client._functions",
    "create_workspace": "determined.experimental.client._functions",
    "delete_workspace": "determined.experimental.client._functions",
    "get_checkpoint": "determined.experimental.client._functions",
    "get_experiment": "determined.experimental.client._functions",
    "get_model": "determined.experimental.client._functions",
    "get_model_by_id": "determined.experimental.client._functions",
    "get_model_labels": "determined.experimental.client._functions",
    "get_models": "determined.experimental.client._functions",
    "get_session_username": "determined.experimental.client._functions",
    "get_trial": "determined.experimental.client._functions",
    "get_user_by_id": "determined.experimental.client._functions",
    "get_user_by_name": "determined.experimental.client._functions",
    "get_workspace": "determined.experimental.client._functions",
    "iter_trials_metrics": "determined.experimental.client._functions",
    "list_experiments": "determined.experimental.client._functions",
    "list_models": "determined.experimental.client._functions",
    "list_users": "determined.experimental.client._functions",
    "list_workspaces": "determined.experimental.client._functions",
    "login": "determined.experimental.client._functions",
    "logout": "determined.experimental.client._functions",
    "stream_trials_metrics": "determined.experimental.client._functions",
    "stream_trials_training_metrics": "determined.experimental.client._functions",
    "stream_trials_validation_metrics": "determined.experimental.client._functions",
    "whoami": "determined.experimental.client._functions",
    "_client": "determined.experimental.client._functions",
}

__getattr__ = _lazy_attributes(__name__, _LAZY)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Checkpoint",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointTrainingMetadata",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentReference",
    "ExperimentSortBy",
    "ExperimentState",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Project",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialReference",
    "TrialSortBy",
    "TrialState",
    "UsageError",
    "User",
    "ValidationMetrics",
    "Workspace",
    "create_experiment",
    "create_model",
    "create_user",
    "create_workspace",
    "delete_workspace",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_model_by_id",
    "get_model_labels",
    "get_models",
    "get_session_username",
    "get_trial",
    "get_user_by_id",
    "get_user_by_name",
    "get_workspace",
    "iter_trials_metrics",
    "list_experiments",
    "list_models",
    "list_users",
    "list_workspaces",
    "login",
    "logout",
    "stream_trials_metrics",
    "stream_trials_training_metrics",
    "stream_trials_validation_metrics",
    "whoami",
]
