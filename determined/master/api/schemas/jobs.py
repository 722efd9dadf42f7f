"""GET/POST /job-queues: the job queue (Determined 0.38's `jobv1.Job`, with the master's snake_case names)."""
from typing import List, Literal, Optional

from pydantic import Field, model_validator

from determined.master.api.schemas._base import StrictWire, Wire

MAX_UPDATES = 100


class JobSummary(Wire):
    state: Literal["STATE_QUEUED", "STATE_SCHEDULED"] = Field(
        description="STATE_QUEUED: nothing of it runs; STATE_SCHEDULED: it holds slots (or runs with none)")
    jobs_ahead: int = Field(description="the jobs before it in its pool's queue")


class Job(Wire):
    job_id: str = Field(description="a UUID of its own, stable while the job lives")
    entity_id: str = Field(description="the experiment id, or the task id of an interactive task")
    type: str = Field(description="TYPE_EXPERIMENT, TYPE_NOTEBOOK, TYPE_SHELL, TYPE_COMMAND, TYPE_TENSORBOARD, ...")
    name: str
    username: str
    workspace_id: Optional[int]
    resource_pool: str
    submission_time: str = Field(description="UTC, ISO 8601")
    priority: int = Field(description="1 runs first, 99 last (priority scheduler)")
    weight: float = Field(description="its share under fair share")
    requested_slots: int = Field(description="the slots it would hold with all its waiting work running")
    allocated_slots: int = Field(description="the slots it holds now")
    is_preemptible: bool = Field(description="whether its pool's scheduler takes slots back from it")
    progress: Optional[float]
    summary: JobSummary
    waiting_reason: Optional[str] = Field(
        default=None, description="why it waits, from what the master recorded (scheduling/wait_reasons.py): "
        "`waiting for 2 slots; 3 jobs ahead in pool 'default'`, and for an experiment the note of a trial that "
        "waits again (e.g. preempted) or whose Ray run waits for a node's storage answer; null when it wants no "
        "slot it does not hold")


class JobQueue(Wire):
    """GET /job-queues: the jobs of one pool, or of every pool, in scheduling order."""

    jobs: List[Job]
    total: int = Field(description="the jobs that matched, before offset and limit")


class QueueControl(StrictWire):
    """One update of POST /job-queues: the job and exactly one change."""

    job_id: str = Field(max_length=64)
    priority: Optional[int] = Field(default=None, description="1-99; priority scheduler")
    weight: Optional[float] = Field(default=None, description="> 0; fair_share scheduler")
    resource_pool: Optional[str] = Field(default=None, max_length=256, description="experiments only")
    ahead_of: Optional[str] = Field(default=None, max_length=64,
                                    description="a job id: move in front of it (Determined <= 0.34)")
    behind_of: Optional[str] = Field(default=None, max_length=64,
                                     description="a job id: move behind it (Determined <= 0.34)")

    @model_validator(mode="after")
    def _exactly_one(self) -> "QueueControl":
        given = [k for k in ("priority", "weight", "resource_pool", "ahead_of", "behind_of")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of priority, weight, resource_pool, ahead_of, behind_of"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self


class UpdateJobQueueRequest(StrictWire):
    updates: List[QueueControl] = Field(max_length=MAX_UPDATES)


class JobQueueUpdated(Wire):
    """The updated jobs, as GET /job-queues shows them now."""

    jobs: List[Job]


__all__ = ["Job", "JobQueue", "JobQueueUpdated", "JobSummary", "QueueControl", "UpdateJobQueueRequest"]
