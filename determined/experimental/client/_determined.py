"""Determined: the entry point of the client SDK."""
from typing import Any, Dict, List, Optional

from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import UsageError, json_object, open_session
from determined.experimental.client._experiment import ExperimentReference
from determined.experimental.client._model import Model, ModelOrderBy, ModelSortBy, order_by_param, sort_by_param
from determined.experimental.client._trial import TrialReference
from determined.experimental.client._workspace import WorkspaceMethods
from determined.experimental import _connect


def _check_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer id, not {value!r}")
    return value


class Determined(WorkspaceMethods):
    """Determined gives access to Determined API objects.

    The master is `master`, else $DET_MASTER, else $DET_MASTER_ADDR; with none set, the master running on
    the local data dir, or the data dir's API opened in this process. Every request is made as `user`
    (default: $DET_USER, else the user of the last `det user login` on that master, else `determined`), with
    that user's token from `det user login`, or a login with a blank password; a user who has a password and
    no token gets an error saying to run `det user login USER`.
    """

    def __init__(self, master: Optional[str] = None, user: Optional[str] = None) -> None:
        if user is not None and (not isinstance(user, str) or not user):
            raise UsageError(f"user must be a user name, not {user!r}")
        self._master = _connect.configured_master(master) or ""
        self._session = open_session(self._master, user)

    @property
    def user(self) -> str:
        """The user this client acts as."""
        return self._session.username()

    def get_experiment(self, experiment_id: int) -> ExperimentReference:
        """The ExperimentReference of the experiment `experiment_id` (a NotFoundError if there is none)."""
        _check_id(experiment_id, "experiment_id")
        self._session.get(f"/experiments/{experiment_id}")
        return ExperimentReference(experiment_id, self._master, _session=self._session)

    def get_trial(self, trial_id: int) -> TrialReference:
        """The TrialReference of the trial `trial_id` (a NotFoundError if there is none)."""
        _check_id(trial_id, "trial_id")
        self._session.get(f"/trials/{trial_id}")
        return TrialReference(trial_id, self._master, _session=self._session)

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The Checkpoint with the given uuid."""
        if not isinstance(uuid, str) or not uuid:
            raise UsageError(f"uuid must be a checkpoint's uuid, not {uuid!r}")
        data = self._session.get(f"/checkpoints/{uuid}")["checkpoint"]
        config = self._session.get(f"/experiments/{data['experiment_id']}")["experiment"]["config"]
        return Checkpoint._from_json(data, config, self._session, self._master)

    def create_model(self, name: str, description: Optional[str] = "", metadata: Optional[Dict[str, Any]] = None) -> Model:
        """Add a model to the registry; `name` must be unique."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"name must be a non-empty string, not {name!r}")
        body = {"description": description or "", "metadata": json_object(metadata if metadata is not None else {},
                                                                             "metadata")}
        data = self._session.post(f"/models/{name}", body)["model"]
        return Model._from_json(data, self._session, self._master)

    def get_model(self, name: str) -> Model:
        """The Model of the registry with the given name."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"name must be a non-empty string, not {name!r}")
        return Model._from_json(self._session.get(f"/models/{name}")["model"], self._session, self._master)

    def get_models(
        self,
        sort_by: ModelSortBy = ModelSortBy.NAME,
        order_by: ModelOrderBy = ModelOrderBy.ASCENDING,
        name: str = "",
        description: str = "",
    ) -> List[Model]:
        """The models of the registry, sorted; `name`/`description` keep those containing the text (any case)."""
        params: Dict[str, Any] = {"order_by": order_by_param(order_by)}
        sort = sort_by_param(sort_by)
        if sort:
            params["sort_by"] = sort
        if name:
            params["name"] = name
        if description:
            params["description"] = description
        models = self._session.get("/models", params)["models"]
        return [Model._from_json(m, self._session, self._master) for m in models]
