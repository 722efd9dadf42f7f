"""ExperimentReference: the checkpoints of one experiment."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from determined.experimental.client import _ranking
from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import MasterBound, UsageError

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


class ExperimentReference(MasterBound):
    """An experiment of the master, for querying its checkpoints."""

    def __init__(self, experiment_id: int, master: Optional[str] = None, *, _session: Optional[Session] = None) -> None:
        super().__init__(master, _session)
        self.id = experiment_id

    def __repr__(self) -> str:
        return f"ExperimentReference(id={self.id})"

    def move_to_project(self, workspace_name: str, project_name: str) -> None:
        """Move the experiment to the project `project_name` of workspace `workspace_name` (its owner or an admin;
        not into an archived one); sets `project_id` and `workspace_id`."""
        from determined.experimental.client._workspace import Workspace

        project = Workspace(self._session, workspace_name=workspace_name).get_project(project_name)
        self._session.post(f"/experiments/{self.id}/move", {"project_id": project.id})
        self.project_id, self.workspace_id = project.id, project.workspace_id

    def _config(self) -> Dict[str, Any]:
        return self._session.get(f"/experiments/{self.id}")["experiment"]["config"]

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
        return [Checkpoint._from_json(c, config, self._session, self._master) for c in best[:limit]]
