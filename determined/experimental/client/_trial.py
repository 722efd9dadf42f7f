"""TrialReference: the checkpoints of one trial."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from determined import errors
from determined.experimental.client import _ranking
from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import MasterBound, UsageError

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


class TrialReference(MasterBound):
    """A trial of the master, for querying its checkpoints."""

    def __init__(self, trial_id: int, master: Optional[str] = None, *, _session: Optional[Session] = None) -> None:
        super().__init__(master, _session)
        self.id = trial_id

    def __repr__(self) -> str:
        return f"TrialReference(id={self.id})"

    def top_checkpoint(self, sort_by: Optional[str] = None, smaller_is_better: Optional[bool] = None) -> Checkpoint:
        """The trial's checkpoint with the best validation metric (`sort_by`, default the searcher's metric)."""
        return self.select_checkpoint(best=True, sort_by=sort_by, smaller_is_better=smaller_is_better)

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: Optional[str] = None,
        sort_by: Optional[str] = None,
        smaller_is_better: Optional[bool] = None,
    ) -> Checkpoint:
        """One checkpoint of the trial: the latest, the best, or the one with `uuid` (exactly one of them).

        `sort_by` and `smaller_is_better` go only with `best`; unset, the searcher's metric and direction
        are used.
        """
        chosen = [name for name, on in (("latest", latest), ("best", best), ("uuid", uuid is not None)) if on]
        if len(chosen) != 1:
            raise UsageError(
                "select_checkpoint() needs exactly one of latest=True, best=True or uuid=...; "
                + (f"got {' and '.join(chosen)}" if chosen else "got none")
            )
        if not best and (sort_by is not None or smaller_is_better is not None):
            raise UsageError("sort_by and smaller_is_better can only be used with best=True")
        if uuid is not None:
            return self._by_uuid(uuid)
        answer = self._session.get(f"/trials/{self.id}")
        checkpoints: List[Dict[str, Any]] = answer["checkpoints"]
        config = self._session.get(f"/experiments/{answer['trial']['experiment_id']}")["experiment"]["config"]
        if latest:
            completed = [c for c in checkpoints if c.get("state") == "COMPLETED"]
            if not completed:
                raise errors.DeterminedError(f"trial {self.id} has no COMPLETED checkpoints")
            chosen_ckpt = max(completed, key=lambda c: (int(c.get("steps_completed") or 0), c["end_time"] or ""))
        else:
            metric, sib = _ranking.criteria(config, sort_by, smaller_is_better)
            ranked = _ranking.ranked(checkpoints, metric, sib)
            if not ranked:
                raise _ranking.none_found(f"trial {self.id}", metric, checkpoints)
            chosen_ckpt = ranked[0]
        return Checkpoint._from_json(chosen_ckpt, config, self._session, self._master)

    def _by_uuid(self, uuid: str) -> Checkpoint:
        data = self._session.get(f"/checkpoints/{uuid}")["checkpoint"]
        if data["trial_id"] != self.id:
            raise errors.DeterminedError(
                f"checkpoint {uuid} belongs to trial {data['trial_id']}, not trial {self.id}; "
                "use Determined().get_checkpoint(uuid) to get any checkpoint"
            )
        config = self._session.get(f"/experiments/{data['experiment_id']}")["experiment"]["config"]
        return Checkpoint._from_json(data, config, self._session, self._master)
