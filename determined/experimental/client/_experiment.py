"""Experiment (0.38; `ExperimentReference` is its 0.13 name): one experiment's state, settings, trials and
checkpoints."""
from __future__ import annotations

import pathlib
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from determined import errors
from determined.experimental.client import _ranking
from determined.experimental.client._checkpoint import Checkpoint, sorted_checkpoints
from determined.experimental.client._common import Connection, MasterBound, UsageError
from determined.experimental.client._enums import (CheckpointSortBy, ExperimentState, OrderBy, TrialSortBy, member,
                                                   state_of)
from determined.experimental.client._names import check_name, project_by_name, workspace_by_name
from determined.experimental.client._trial import Trial

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session

TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
GC_SETTINGS = ("save_experiment_best", "save_trial_best", "save_trial_latest")


class Experiment(MasterBound):
    """An experiment of the master. `config`, `state`, `name`, `description`, `notes`, `labels`, `archived`,
    `progress` and `owner` are cached from the last `reload()` (the SDK's getters reload it)."""

    def __init__(self, experiment_id: int, master: Optional[str] = None, *,
                 _session: "Optional[Session | Connection]" = None) -> None:
        super().__init__(master, _session)
        self.id = experiment_id
        self.config: Optional[Dict[str, Any]] = None
        self.state: Any = None
        self.name: Optional[str] = None
        self.description: Optional[str] = None
        self.notes: Optional[str] = None
        self.labels: Optional[List[str]] = None
        self.archived: Optional[bool] = None
        self.progress: Optional[float] = None
        self.owner: Optional[str] = None
        self.project_id: Optional[int] = None
        self.workspace_id: Optional[int] = None
        self._json: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"Experiment(id={self.id})"

    def _update(self, e: Dict[str, Any]) -> "Experiment":
        self._json = dict(e)
        self.config = e.get("config")
        self.state = state_of(ExperimentState, e.get("state"))
        self.name = e.get("name")
        self.description = e.get("description")
        self.notes = e.get("notes") or ""
        self.labels = list(e.get("labels") or [])
        self.archived = bool(e.get("archived"))
        self.progress = e.get("progress")
        self.owner = e.get("owner")
        self.project_id = e.get("project_id", self.project_id)
        self.workspace_id = e.get("workspace_id", self.workspace_id)
        return self

    def reload(self) -> None:
        """Read the experiment's state and settings again from the master."""
        self._describe()

    def _describe(self) -> List[Dict[str, Any]]:
        """Read the experiment again; the records of its trials, by id."""
        from determined.experimental.client._records import describe_experiment

        desc = describe_experiment(self._session, self.id)
        self._update(desc.experiment)
        return list(desc.trials)

    def to_json(self) -> Dict[str, Any]:
        """The master's record of the experiment as of the last read (read now if never): id, state, config,
        progress, owner, labels, searcher_metric, ... (what `det experiment list --json` prints)."""
        if self._json is None:
            self.reload()
        return dict(self._json or {})

    def describe(self, checkpoints: bool = False) -> Dict[str, Any]:
        """The experiment's record read now, with the records of its trials under "trials" and, with
        `checkpoints`, those of its checkpoints (every state, by id) under "checkpoints"."""
        trials = self._describe()
        out = {**(self._json or {}), "trials": trials}
        if checkpoints:
            out["checkpoints"] = self.checkpoints_json()
        return out

    def get_config(self) -> Dict[str, Any]:
        """The experiment's config as the master stores it (with the defaults filled in), read now."""
        return self._config()

    def move_to_project(self, workspace_name: str, project_name: str) -> None:
        """Move the experiment to the project `project_name` of workspace `workspace_name` (its owner or an admin;
        not into an archived one); sets `project_id` and `workspace_id`."""
        workspace = workspace_by_name(self._session, check_name(workspace_name, "workspace_name"))
        project = project_by_name(self._session, workspace["id"], project_name, workspace["name"])
        self._session.post(f"/experiments/{self.id}/move", {"project_id": project["id"]})
        self.project_id, self.workspace_id = project["id"], project.get("workspace_id")

    def _config(self) -> Dict[str, Any]:
        self.reload()
        return self.config or {}

    # ------------------------------------------------------------ lifecycle

    def _post(self, action: str, work: bool = False) -> None:
        session = self._connection.for_work() if work else self._session
        self._update(session.post(f"/experiments/{self.id}/{action}")["experiment"])

    def activate(self) -> None:
        """Activate (resume) a paused experiment. With no master running on the local data dir, this process
        becomes it and runs the experiment in the background."""
        self._post("activate", work=True)

    def pause(self) -> None:
        """Pause the experiment: its running trials checkpoint and stop."""
        self._post("pause")

    def cancel(self) -> None:
        """Cancel the experiment: its running trials checkpoint and stop for good."""
        self._post("cancel")

    def kill(self) -> None:
        """Kill the experiment's trials at once."""
        self._post("kill")

    def archive(self) -> None:
        """Archive an ended experiment (hidden from listings unless asked for)."""
        self._post("archive")

    def unarchive(self) -> None:
        self._post("unarchive")

    def delete(self) -> List[str]:
        """Delete an ended experiment with its checkpoints (files too), metrics and logs (not while one of its
        checkpoints is a version in the model registry); returns the uuids of the checkpoints deleted."""
        answer = self._session.delete(f"/experiments/{self.id}") or {}
        self.state = ExperimentState.DELETED
        return list(answer.get("deleted_checkpoints") or [])

    def wait(self, interval: float = 5.0) -> ExperimentState:
        """Wait until the experiment ends (COMPLETED, CANCELED, ERROR, DELETED) and return that state; polls every
        `interval` seconds. A PAUSED experiment raises ValueError: it would never end by itself."""
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise UsageError(f"interval must be a positive number of seconds, not {interval!r}")
        while True:
            try:
                self.reload()
            except errors.NotFoundError:
                self.state = ExperimentState.DELETED
            if self.state in TERMINAL:
                return self.state  # type: ignore[no-any-return]
            if self.state == ExperimentState.PAUSED:
                raise ValueError(f"experiment {self.id} is PAUSED; activate it (Experiment.activate()) before waiting "
                                 "for it to end")
            time.sleep(interval)

    # ------------------------------------------------------------ settings

    def _patch(self, body: Dict[str, Any]) -> None:
        self._update(self._session.patch(f"/experiments/{self.id}", body)["experiment"])

    def set_name(self, name: str) -> None:
        self._patch({"name": name})

    def set_description(self, description: str) -> None:
        self._patch({"description": description})

    def set_notes(self, notes: str) -> None:
        self._patch({"notes": notes})

    def set_labels(self, labels: List[str]) -> None:
        """Replace the experiment's labels."""
        if isinstance(labels, str) or not isinstance(labels, (list, tuple, set)):
            raise UsageError(f"labels must be a list of strings, not {labels!r}")
        self._patch({"labels": list(labels)})

    def add_label(self, label: str) -> None:
        self.reload()
        if label not in (self.labels or []):
            self._patch({"labels": list(self.labels or []) + [label]})

    def remove_label(self, label: str) -> None:
        self.reload()
        self._patch({"labels": [x for x in self.labels or [] if x != label]})

    def _set_resources(self, field: str, value: Any) -> None:
        self._patch({"resources": {field: value}})

    def set_max_slots(self, max_slots: Optional[int]) -> None:
        """The most slots the experiment may use at once (None: no limit)."""
        self._set_resources("max_slots", max_slots)

    def set_weight(self, weight: float) -> None:
        """The experiment's share of the slots under fair share."""
        self._set_resources("weight", weight)

    def set_priority(self, priority: int) -> None:
        """The experiment's priority (1 to 99; lower runs first)."""
        self._set_resources("priority", priority)

    def _gc_policy(self, settings: Dict[str, Optional[int]]) -> Dict[str, int]:
        policy = {k: v for k, v in settings.items() if v is not None}
        for name, value in policy.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a number of checkpoints (0 or more), not {value!r}")
        if not policy:
            raise UsageError(f"give at least one of {', '.join(GC_SETTINGS)}")
        return policy

    def preview_gc_policy(self, save_experiment_best: Optional[int] = None, save_trial_best: Optional[int] = None,
                          save_trial_latest: Optional[int] = None) -> List[Dict[str, Any]]:
        """The records of the checkpoints that checkpoint GC would delete under these settings (a setting left None
        stays the experiment's own); nothing changes."""
        policy = self._gc_policy({"save_experiment_best": save_experiment_best, "save_trial_best": save_trial_best,
                                  "save_trial_latest": save_trial_latest})
        return list(self._session.get(f"/experiments/{self.id}/preview_gc", policy)["delete"])

    def set_gc_policy(self, save_experiment_best: Optional[int] = None, save_trial_best: Optional[int] = None,
                      save_trial_latest: Optional[int] = None) -> List[str]:
        """Change which checkpoints GC keeps (a setting left None stays as it is); the checkpoints the new settings
        do not keep are deleted now. Returns their uuids."""
        policy = self._gc_policy({"save_experiment_best": save_experiment_best, "save_trial_best": save_trial_best,
                                  "save_trial_latest": save_trial_latest})
        answer = self._session.patch(f"/experiments/{self.id}", {"checkpoint_storage": policy})
        if answer.get("experiment"):
            self._update(answer["experiment"])
        return list(answer.get("deleted") or [])

    def delete_tensorboard_files(self) -> bool:
        """Delete the TensorBoard event files of this experiment's trials (`det tensorboard start` writes them again
        from the master's metrics); False when there were none."""
        answer = self._session.delete(f"/experiments/{self.id}/tensorboard-files") or {}
        return bool(answer.get("deleted"))

    def get_model_definition(self) -> bytes:
        """The experiment's model definition, as a .tgz archive."""
        import base64

        return base64.b64decode(self._session.get(f"/experiments/{self.id}/model_def")["b64_tgz"])

    def download_code(self, output_dir: Optional[str] = None) -> str:
        """Save the experiment's model definition as `exp-<id>_model_def.tar.gz` in `output_dir` (default: the
        current directory); returns the file's path."""
        data = self.get_model_definition()
        folder = pathlib.Path(output_dir).expanduser() if output_dir else pathlib.Path(".")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"exp-{self.id}_model_def.tar.gz"
        path.write_bytes(data)
        return str(path)

    def checkpoints_json(self, states: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """The records of the experiment's checkpoints (every state, or those of `states`), by id: for tables and
        JSON output (`list_checkpoints` gives Checkpoint objects)."""
        params = {"states": list(states)} if states else None
        return list(self._session.get(f"/experiments/{self.id}/checkpoints", params)["checkpoints"])

    # ------------------------------------------------------------ trials

    def list_trials(self, sort_by: TrialSortBy = TrialSortBy.ID,
                    order_by: OrderBy = OrderBy.ASCENDING) -> List[Trial]:
        """The experiment's trials, sorted."""
        return list(self.iter_trials(sort_by, order_by))

    def iter_trials(self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING,
                    limit: Optional[int] = None) -> Iterator[Trial]:
        key = member(TrialSortBy, sort_by, "sort_by").value
        descending = member(OrderBy, order_by, "order_by") is OrderBy.DESCENDING
        trials = self._describe()
        present = [t for t in trials if t.get(key) is not None]
        present.sort(key=lambda t: (t[key], t["id"]), reverse=descending)
        ordered = present + [t for t in trials if t.get(key) is None]  # unknown values last either way
        for t in ordered[:limit]:
            yield Trial(t["id"], self._master, _session=self._connection)._update(t)

    def get_trials(self, sort_by: TrialSortBy = TrialSortBy.ID, order_by: OrderBy = OrderBy.ASCENDING) -> List[Trial]:
        """Deprecated name of list_trials."""
        return self.list_trials(sort_by, order_by)

    def await_first_trial(self, interval: float = 0.1) -> Trial:
        """Wait until the experiment has a trial and return the first one."""
        while True:
            trials = self.list_trials()
            if trials:
                return trials[0]
            self.reload()
            if self.state in TERMINAL:
                raise errors.DeterminedError(f"experiment {self.id} ended ({self.state}) without creating a trial")
            time.sleep(interval)

    # ------------------------------------------------------------ checkpoints

    def list_checkpoints(self, sort_by: "Optional[str | CheckpointSortBy]" = None,
                         order_by: Optional[OrderBy] = None, max_results: Optional[int] = None) -> List[Checkpoint]:
        """The experiment's COMPLETED checkpoints, sorted by `sort_by` (a CheckpointSortBy or a validation metric's
        name) in `order_by` order (give both or neither; default: the searcher's metric, best first); at most
        `max_results`."""
        config = self._config()
        checkpoints = self._session.get(f"/experiments/{self.id}/checkpoints", {"states": "COMPLETED"})["checkpoints"]
        return sorted_checkpoints(self._connection, self._master, checkpoints, config, sort_by, order_by, max_results)

    def top_checkpoint(self, sort_by: Optional[str] = None, smaller_is_better: Optional[bool] = None) -> Checkpoint:
        """The checkpoint with the best validation metric (`sort_by`, default the searcher's metric)."""
        return self.top_n_checkpoints(1, sort_by=sort_by, smaller_is_better=smaller_is_better)[0]

    def top_n_checkpoints(
        self, limit: int, sort_by: Optional[str] = None, smaller_is_better: Optional[bool] = None
    ) -> List[Checkpoint]:
        """The best checkpoint of each of the `limit` best distinct trials, best first.

        Only COMPLETED checkpoints that have the metric among their validation metrics count. With
        `sort_by` unset, the searcher's metric and smaller_is_better are used and `smaller_is_better` is ignored.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive integer, not {limit!r}")
        config = self._config()
        metric, sib = _ranking.criteria(config, sort_by, smaller_is_better)
        checkpoints = self._session.get(f"/experiments/{self.id}/checkpoints", {"states": "COMPLETED"})["checkpoints"]
        best = _ranking.best_per_trial(checkpoints, metric, sib)
        if not best:
            raise _ranking.none_found(f"experiment {self.id}", metric, checkpoints)
        return [Checkpoint._from_json(c, config, self._connection, self._master) for c in best[:limit]]


ExperimentReference = Experiment  # the 0.13 name
Trial._experiment_class = Experiment  # Trial.get_experiment (this module imports _trial, never the other way)
