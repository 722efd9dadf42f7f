"""The module functions of `determined.experimental.client` (Determined 0.38's): each calls the method of the same
name on a default `Determined`, kept in the package's `_default` (`client.login()` makes it; the first other call
makes one with the defaults). Imported on first use of one of them (the package imports its names lazily)."""
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._determined import Determined
from determined.experimental.client._enums import ExperimentSortBy, ExperimentState, OrderBy
from determined.experimental.client._experiment import Experiment
from determined.experimental.client._metrics import TrainingMetrics, TrialMetrics, ValidationMetrics
from determined.experimental.client._model import Model, ModelSortBy
from determined.experimental.client._trial import Trial
from determined.experimental.client._user import User
from determined.experimental.client._workspace import Workspace


def _package() -> Any:
    return sys.modules["determined.experimental.client"]


def _client() -> Determined:
    """The default Determined: the one `login()` made, else one made now with the defaults."""
    package = _package()
    if package._default is None:
        package._default = Determined()
    return package._default  # type: ignore[no-any-return]


def login(master: Optional[str] = None, user: Optional[str] = None, password: Optional[str] = None,
          cert_path: Optional[str] = None, cert_name: Optional[str] = None, noverify: bool = False) -> None:
    """Set the master and user of the module functions; call it once, before any of them (ValueError otherwise).
    Without it they use $DET_MASTER (else the local data dir) and $DET_USER (else the last `det user login`)."""
    package = _package()
    if package._default is not None:
        raise ValueError("client.login() may be called only once, before any other function of "
                         "determined.experimental.client; to act as another user, create a Determined(...) object")
    package._default = Determined(master, user, password, cert_path, cert_name, noverify)


def logout() -> None:
    """Revoke the default session's token; the next function call logs in afresh."""
    package = _package()
    current, package._default = package._default, None
    (current or Determined()).logout()


def whoami() -> User:
    return _client().whoami()


def get_session_username() -> str:
    return _client().get_session_username()


def create_experiment(config: Union[str, Any, Dict[str, Any]], model_dir: Optional[str] = None,
                      includes: Optional[Sequence[str]] = None, project_id: Optional[int] = None,
                      template: Optional[str] = None) -> Experiment:
    return _client().create_experiment(config, model_dir, includes, project_id, template)


def get_experiment(experiment_id: int) -> Experiment:
    return _client().get_experiment(experiment_id)


def list_experiments(sort_by: Optional[ExperimentSortBy] = None, order_by: Optional[OrderBy] = None,
                     experiment_ids: Optional[List[int]] = None, labels: Optional[List[str]] = None,
                     users: Optional[List[str]] = None, states: Optional[List[ExperimentState]] = None,
                     name: Optional[str] = None, project_id: Optional[int] = None) -> List[Experiment]:
    return _client().list_experiments(sort_by, order_by, experiment_ids, labels, users, states, name, project_id)


def get_trial(trial_id: int) -> Trial:
    return _client().get_trial(trial_id)


def get_checkpoint(uuid: str) -> Checkpoint:
    return _client().get_checkpoint(uuid)


def create_model(name: str, description: Optional[str] = "", metadata: Optional[Dict[str, Any]] = None,
                 labels: Optional[List[str]] = None, workspace_name: Optional[str] = None) -> Model:
    return _client().create_model(name, description, metadata, labels, workspace_name)


def get_model(identifier: Union[str, int]) -> Model:
    return _client().get_model(identifier)


def get_model_by_id(model_id: int) -> Model:
    return _client().get_model_by_id(model_id)


def list_models(sort_by: ModelSortBy = ModelSortBy.NAME, order_by: OrderBy = OrderBy.ASCENDING,
                name: Optional[str] = None, description: Optional[str] = None, model_id: Optional[int] = None,
                workspace_names: Optional[List[str]] = None, workspace_ids: Optional[List[int]] = None) -> List[Model]:
    return _client().list_models(sort_by, order_by, name, description, model_id, workspace_names, workspace_ids)


def get_models(sort_by: ModelSortBy = ModelSortBy.NAME, order_by: OrderBy = OrderBy.ASCENDING,
               name: Optional[str] = None, description: Optional[str] = None, model_id: Optional[int] = None,
               workspace_names: Optional[List[str]] = None, workspace_ids: Optional[List[int]] = None) -> List[Model]:
    return _client().get_models(sort_by, order_by, name, description, model_id, workspace_names, workspace_ids)


def get_model_labels() -> List[str]:
    return _client().get_model_labels()


def create_user(username: str, admin: bool = False, password: Optional[str] = None, remote: bool = False) -> User:
    return _client().create_user(username, admin, password, remote)


def get_user_by_id(user_id: int) -> User:
    return _client().get_user_by_id(user_id)


def get_user_by_name(user_name: str) -> User:
    return _client().get_user_by_name(user_name)


def list_users(active: Optional[bool] = None) -> List[User]:
    return _client().list_users(active)


def iter_trials_metrics(trial_ids: List[int], group: str) -> Iterator[TrialMetrics]:
    return _client().iter_trials_metrics(trial_ids, group)


def stream_trials_metrics(trial_ids: List[int], group: str) -> Iterator[TrialMetrics]:
    return _client().stream_trials_metrics(trial_ids, group)


def stream_trials_training_metrics(trial_ids: List[int]) -> Iterator[TrainingMetrics]:
    return _client().stream_trials_training_metrics(trial_ids)


def stream_trials_validation_metrics(trial_ids: List[int]) -> Iterator[ValidationMetrics]:
    return _client().stream_trials_validation_metrics(trial_ids)


def create_workspace(name: str) -> Workspace:
    return _client().create_workspace(name)


def get_workspace(name: str) -> Workspace:
    return _client().get_workspace(name)


def list_workspaces() -> List[Workspace]:
    return _client().list_workspaces()


def delete_workspace(name: str) -> None:
    _client().delete_workspace(name)
