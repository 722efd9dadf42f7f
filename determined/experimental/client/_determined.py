"""Determined: the entry point of the client SDK (0.38), whose methods the module functions of
`determined.experimental.client` call on a default instance."""
from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from determined import errors
from determined.experimental.client._common import Connection, UsageError, json_object
from determined.experimental.client._enums import (ExperimentSortBy, ExperimentState, ModelSortBy, OrderBy, member,
                                                   order_by_param, sort_by_param)
from determined.experimental.client._experiment import Experiment
from determined.experimental.client._template import TemplateMethods
from determined.experimental.client._workspace import WorkspaceMethods, workspace_id_of

if TYPE_CHECKING:  # imported where one is made: `det experiment list` needs none of them
    from determined.experimental.client import _metrics
    from determined.experimental.client._checkpoint import Checkpoint
    from determined.experimental.client._model import Model
    from determined.experimental.client._trial import Trial
    from determined.experimental.client._user import User


def _check_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer id, not {value!r}")
    return value


class Determined(WorkspaceMethods, TemplateMethods):
    """Determined gives access to Determined API objects.

    The master is `master`, else $DET_MASTER, else $DET_MASTER_ADDR; with none set, the master running on
    the local data dir, or the data dir's API opened in this process. Every request is made as `user`
    (default: $DET_USER, else the user of the last `det user login` on that master, else `determined`), with
    `password` when given (a login, whose token is cached like `det user login`'s), else that user's token from
    `det user login`, or a login with a blank password; a user who has a password and no token gets an error
    saying to run `det user login USER`. `cert_path` (a CA bundle) and `noverify` are for an https master.
    """

    @property
    def _model_class(self) -> Any:
        """The class of the models it returns (0.13's Determined returns 0.13's Model face)."""
        from determined.experimental.client._model import Model

        return Model

    def __init__(self, master: Optional[str] = None, user: Optional[str] = None, password: Optional[str] = None,
                 cert_path: Optional[str] = None, cert_name: Optional[str] = None, noverify: bool = False) -> None:
        if user is not None and (not isinstance(user, str) or not user):
            raise UsageError(f"user must be a user name, not {user!r}")
        if password is not None and not isinstance(password, str):
            raise UsageError("password must be a string")
        del cert_name  # the host name to check the certificate against: httpx checks the URL's host
        if password is not None:
            user = user or os.environ.get("DET_USER") or "determined"
        elif user is None and os.environ.get("DET_USER") and os.environ.get("DET_PASS") is not None:
            user, password = os.environ["DET_USER"], os.environ["DET_PASS"]
        self._connection = Connection(master, user, cert_path=cert_path, noverify=noverify)
        self._master = self._connection.master
        if password is not None:
            self._session.login(user, password, make_default=False)

    @property
    def _session(self) -> Any:
        return self._connection.session

    @property
    def user(self) -> str:
        """The user this client acts as."""
        return str(self._session.username())

    def close(self) -> None:
        """Stop the master this object started to run experiments (see `create_experiment`), if any."""
        self._connection.close()

    def get_master_info(self) -> Dict[str, Any]:
        """What the master says of itself: its version, URL, data dir, and whether it runs the scheduler."""
        from determined.experimental.client._info import get_master_info

        return get_master_info(self)

    # ------------------------------------------------------------ users and sessions

    def whoami(self) -> User:
        """The user of this session."""
        from determined.experimental.client._user import User

        return User._from_json(self._session.get("/me")["user"], self._connection)

    def get_session_username(self) -> str:
        return self.whoami().username

    def logout(self) -> None:
        """Revoke this session's token and forget it."""
        self._session.logout()

    def create_user(self, username: str, admin: bool = False, password: Optional[str] = None,
                    remote: bool = False) -> User:
        """A new user (admins only); `remote` users (single sign-on) do not exist here."""
        from determined.experimental.client._user import User

        if remote:
            raise UsageError("remote (SSO) users do not exist on this platform; create a user with a password")
        body: Dict[str, Any] = {"username": username, "admin": bool(admin)}
        if password is not None:
            body["password"] = password
        return User._from_json(self._session.post("/users", body)["user"], self._connection)

    def list_users(self, active: Optional[bool] = None) -> List[User]:
        from determined.experimental.client._user import User

        users = [User._from_json(u, self._connection) for u in self._session.get("/users")["users"]]
        return [u for u in users if active is None or u.active == active]

    def get_user_by_name(self, user_name: str) -> User:
        for u in self.list_users():
            if u.username == user_name:
                return u
        raise errors.NotFoundError(404, f"user {user_name!r} not found; `det user list` shows the users")

    def get_user_by_id(self, user_id: int) -> User:
        _check_id(user_id, "user_id")
        for u in self.list_users():
            if u.user_id == user_id:
                return u
        raise errors.NotFoundError(404, f"user {user_id} not found; `det user list` shows the users")

    # ------------------------------------------------------------ experiments

    def create_experiment(self, config: Union[str, pathlib.Path, Dict[str, Any]], model_dir: Optional[str] = None,
                          includes: Optional[Sequence[str]] = None, project_id: Optional[int] = None,
                          template: Optional[str] = None) -> Experiment:
        """Create an experiment from `config` (a dict, a YAML file's path, or YAML text) and the code in `model_dir`
        (plus the files or directories `includes`), activated. With no master running on the local data dir,
        this process becomes it: the experiment runs in the background until it ends, `close()` is called, or
        the process exits (then its trials checkpoint, and it resumes when a master next runs there).
        `template`: the name of a config template stored on the master, merged under `config`. What is uploaded
        follows `det experiment create`'s rules (client/_submit.py, staged_model_dir): `.detignore` honoured, a
        symbolic link to a file included by its content."""
        from determined import config as det_config
        from determined.experimental.client._submit import submit_experiment

        raw = det_config.config_from(str(config) if isinstance(config, pathlib.Path) else config)
        if project_id is not None:
            _check_id(project_id, "project_id")
        exp = submit_experiment(self._connection, raw, model_dir, includes=includes, template=template,
                                project_id=project_id)
        return Experiment(exp["id"], self._master, _session=self._connection)._update(exp)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment `experiment_id` (a NotFoundError if there is none)."""
        _check_id(experiment_id, "experiment_id")
        data = self._session.get(f"/experiments/{experiment_id}")["experiment"]
        return Experiment(experiment_id, self._master, _session=self._connection)._update(data)

    def list_experiments(self, sort_by: Optional[ExperimentSortBy] = None, order_by: Optional[OrderBy] = None,
                         experiment_ids: Optional[List[int]] = None, labels: Optional[List[str]] = None,
                         users: Optional[List[str]] = None, states: Optional[List[ExperimentState]] = None,
                         name: Optional[str] = None, project_id: Optional[int] = None) -> List[Experiment]:
        """Experiments that match every filter given: ids, any of `labels`, owned by any of `users`, in any of
        `states`, whose name contains `name`, in project `project_id`; sorted (default by id, ascending)."""
        key = member(ExperimentSortBy, sort_by if sort_by is not None else ExperimentSortBy.ID, "sort_by").value
        descending = member(OrderBy, order_by if order_by is not None else OrderBy.ASC, "order_by") is OrderBy.DESC
        wanted_states = {member(ExperimentState, s, "states").value for s in states} if states is not None else None
        found = []
        for e in self._session.get("/experiments")["experiments"]:
            if experiment_ids is not None and e["id"] not in experiment_ids:
                continue
            if labels is not None and not set(labels) & set(e.get("labels") or []):
                continue
            if users is not None and e.get("owner") not in users:
                continue
            if wanted_states is not None and e["state"] not in wanted_states:
                continue
            if name is not None and name not in (e.get("name") or ""):
                continue
            if project_id is not None and e.get("project_id") != project_id:
                continue
            found.append(e)
        found.sort(key=lambda e: (e.get(key) is None, e.get(key) if e.get(key) is not None else 0, e["id"]),
                   reverse=descending)
        return [Experiment(e["id"], self._master, _session=self._connection)._update(e) for e in found]

    def get_trial(self, trial_id: int) -> Trial:
        """The trial `trial_id` (a NotFoundError if there is none)."""
        from determined.experimental.client._trial import Trial

        _check_id(trial_id, "trial_id")
        data = self._session.get(f"/trials/{trial_id}")["trial"]
        return Trial(trial_id, self._master, _session=self._connection)._update(data)

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The Checkpoint with the given uuid."""
        from determined.experimental.client._checkpoint import Checkpoint

        if not isinstance(uuid, str) or not uuid:
            raise UsageError(f"uuid must be a checkpoint's uuid, not {uuid!r}")
        data = self._session.get(f"/checkpoints/{uuid}")["checkpoint"]
        config = self._session.get(f"/experiments/{data['experiment_id']}")["experiment"]["config"]
        return Checkpoint._from_json(data, config, self._connection, self._master)

    # ------------------------------------------------------------ metrics

    def iter_trials_metrics(self, trial_ids: List[int], group: str) -> Iterator[_metrics.TrialMetrics]:
        """The metrics of `group` (training, validation, or a report_metrics group) of each trial, in turn."""
        from determined.experimental.client import _metrics

        return _metrics.trials_metrics(self._session, trial_ids, group)

    def stream_trials_metrics(self, trial_ids: List[int], group: str) -> Iterator[_metrics.TrialMetrics]:
        """Deprecated name of iter_trials_metrics."""
        return self.iter_trials_metrics(trial_ids, group)

    def stream_trials_training_metrics(self, trial_ids: List[int]) -> Iterator[_metrics.TrainingMetrics]:
        return self.iter_trials_metrics(trial_ids, "training")  # type: ignore[return-value]

    def stream_trials_validation_metrics(self, trial_ids: List[int]) -> Iterator[_metrics.ValidationMetrics]:
        return self.iter_trials_metrics(trial_ids, "validation")  # type: ignore[return-value]

    # ------------------------------------------------------------ model registry

    def create_model(self, name: str, description: Optional[str] = "", metadata: Optional[Dict[str, Any]] = None,
                     labels: Optional[List[str]] = None, workspace_name: Optional[str] = None) -> Model:
        """Add a model to the registry; `name` must be unique. It goes to the workspace `workspace_name` (default:
        Uncategorized)."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"name must be a non-empty string, not {name!r}")
        body = {"description": description or "", "metadata": json_object(metadata if metadata is not None else {},
                                                                             "metadata")}
        if workspace_name is not None:
            body["workspace_id"] = workspace_id_of(self._session, workspace_name)
        data = self._session.post(f"/models/{name}", body)["model"]
        model = self._model_class._from_json(data, self._connection, self._master)
        if labels:
            model.set_labels(labels)
        return model  # type: ignore[no-any-return]

    def get_model(self, identifier: Union[str, int]) -> Model:
        """The model of the registry with the given name (or id)."""
        if isinstance(identifier, int) and not isinstance(identifier, bool):
            return self.get_model_by_id(identifier)
        if not isinstance(identifier, str) or not identifier:
            raise UsageError(f"name must be a non-empty string, not {identifier!r}")
        data = self._session.get(f"/models/{identifier}")["model"]
        return self._model_class._from_json(data, self._connection, self._master)  # type: ignore[no-any-return]

    def get_model_by_id(self, model_id: int) -> Model:
        _check_id(model_id, "model_id")
        for m in self._session.get("/models")["models"]:
            if m.get("id") == model_id:
                return self._model_class._from_json(m, self._connection, self._master)  # type: ignore[no-any-return]
        raise errors.NotFoundError(404, f"model {model_id} not found")

    def list_models(self, sort_by: ModelSortBy = ModelSortBy.NAME, order_by: OrderBy = OrderBy.ASCENDING,
                    name: Optional[str] = None, description: Optional[str] = None,
                    model_id: Optional[int] = None, workspace_names: Optional[List[str]] = None,
                    workspace_ids: Optional[List[int]] = None) -> List[Model]:
        """The models of the registry, sorted; `name`/`description` keep those containing the text (any case),
        `model_id` the one model, `workspace_names`/`workspace_ids` those of the workspaces."""
        params: Dict[str, Any] = {"order_by": order_by_param(order_by)}
        sort = sort_by_param(sort_by)
        if sort:
            params["sort_by"] = sort
        if name:
            params["name"] = name
        if description:
            params["description"] = description
        models = self._session.get("/models", params)["models"]
        if model_id is not None:
            models = [m for m in models if m.get("id") == model_id]
        if workspace_names is not None:
            models = [m for m in models if m.get("workspace") in workspace_names]
        if workspace_ids is not None:
            models = [m for m in models if m.get("workspace_id") in workspace_ids]
        return [self._model_class._from_json(m, self._connection, self._master) for m in models]

    def get_models(self, sort_by: ModelSortBy = ModelSortBy.NAME, order_by: OrderBy = OrderBy.ASCENDING,
                   name: Optional[str] = None, description: Optional[str] = None, model_id: Optional[int] = None,
                   workspace_names: Optional[List[str]] = None,
                   workspace_ids: Optional[List[int]] = None) -> List[Model]:
        """Deprecated name of list_models (0.38)."""
        return self.list_models(sort_by, order_by, name or None, description or None, model_id, workspace_names,
                                workspace_ids)

    def get_model_labels(self) -> List[str]:
        """Every label of the registry's models, the most used first."""
        counts: Dict[str, int] = {}
        for m in self._session.get("/models")["models"]:
            for label in m.get("labels") or []:
                counts[label] = counts.get(label, 0) + 1
        return sorted(counts, key=lambda label: (-counts[label], label))
