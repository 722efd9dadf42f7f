"""The job queue of a master (GET/POST /api/v1/job-queues): what `det job list|update` works through. Determined
0.38's SDK had no job class (its CLI called the API bindings); `Jobs` is that layer here."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from determined.experimental.client._common import Connection, UsageError


class Job:
    """One job of the queue: `job_id`, `type` (TYPE_EXPERIMENT, ...), `entity_id` (the experiment or task id),
    `name`, `username`, `resource_pool`, `priority`, `weight`, `requested_slots`, `allocated_slots`, `state`
    (STATE_QUEUED or STATE_SCHEDULED), `jobs_ahead`, `submission_time`."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self._json = dict(data)
        for key in ("job_id", "type", "entity_id", "name", "username", "workspace_id", "resource_pool", "priority",
                    "weight", "requested_slots", "allocated_slots", "is_preemptible", "submission_time", "progress"):
            setattr(self, key, data.get(key))
        summary = data.get("summary") or {}
        self.state: str = summary.get("state", "")
        self.jobs_ahead: int = summary.get("jobs_ahead", 0)

    def __repr__(self) -> str:
        return f"Job(job_id={self._json.get('job_id')!r}, type={self._json.get('type')!r}, name={self._json.get('name')!r})"

    def to_json(self) -> Dict[str, Any]:
        return dict(self._json)


class Jobs:
    """The job queue on a connection (a `Connection`, or a session)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection if isinstance(connection, Connection) else Connection(session=connection)

    @property
    def _session(self) -> Any:
        return self._connection.session

    def list_jobs(self, resource_pool: Optional[str] = None, *, reverse: bool = False, offset: int = 0,
                  limit: int = 1000) -> List[Job]:
        """The active jobs of `resource_pool` (every pool when None), in scheduling order."""
        params: Dict[str, Any] = {"offset": offset, "limit": limit, "order_by": "desc" if reverse else "asc"}
        if resource_pool is not None:
            params["resource_pool"] = resource_pool
        return [Job(j) for j in self._session.get("/job-queues", params=params)["jobs"]]

    def update_job(self, job_id: str, *, priority: Optional[int] = None, weight: Optional[float] = None,
                   resource_pool: Optional[str] = None, ahead_of: Optional[str] = None,
                   behind_of: Optional[str] = None) -> Job:
        """Change one thing of a job: its priority (1 runs first, 99 last), weight (fair share), pool
        (experiments), or its place in the queue next to another job (`ahead_of`/`behind_of`: Determined
        0.20-0.34; removed from Determined in 0.35, kept here with their 0.34 meaning)."""
        given = {k: v for k, v in (("priority", priority), ("weight", weight), ("resource_pool", resource_pool),
                                   ("ahead_of", ahead_of), ("behind_of", behind_of)) if v is not None}
        if len(given) != 1:
            raise UsageError("give exactly one of priority, weight, resource_pool, ahead_of, behind_of")
        answer = self._session.post("/job-queues", {"updates": [{"job_id": job_id, **given}]})
        return Job(answer["jobs"][0])
