"""The job queue: every active experiment is a job, and so is every interactive task (tasks/ adds its own).

A *job* is what the scheduler orders (Determined 0.38, `det job list`): one per active experiment (all its trials)
and one per notebook, shell, command or TensorBoard. Each kind of job comes from a `JobSource`, registered once
with `register_source`; the job listing (`GET /api/v1/job-queues`), the updates (`POST /api/v1/job-queues`) and
the scheduler read every registered source the same way. This module knows the experiments' source; another
kind adds its jobs with one call:

    from determined.master.scheduling import jobs
    jobs.register_source(MyTaskJobs())   # at import time of the module that owns those tasks

A source lists its own jobs from the database session it is given (read only), and applies the updates a user
asks for (inside a write transaction, after the route checked who may do it with `JobSource.owner_of`).

Order of the queue (priority scheduler): a smaller `priority` first; within one priority, `queue_position`
(set by `--ahead-of/--behind-of`, Determined <= 0.34), else the submission time, then the job id.
"""
import dataclasses
import datetime
import uuid
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

from sqlalchemy.orm import Session

# Job types, as Determined's `jobv1.Type` names them on the wire.
TYPE_EXPERIMENT = "TYPE_EXPERIMENT"
TYPE_NOTEBOOK = "TYPE_NOTEBOOK"
TYPE_TENSORBOARD = "TYPE_TENSORBOARD"
TYPE_SHELL = "TYPE_SHELL"
TYPE_COMMAND = "TYPE_COMMAND"
TYPE_GENERIC = "TYPE_GENERIC"
JOB_TYPES = (TYPE_EXPERIMENT, TYPE_NOTEBOOK, TYPE_TENSORBOARD, TYPE_SHELL, TYPE_COMMAND, TYPE_GENERIC)

# Queue states (`jobv1.State`): nothing allocated yet, or holding (some of) its slots.
STATE_QUEUED = "STATE_QUEUED"
STATE_SCHEDULED = "STATE_SCHEDULED"

DEFAULT_PRIORITY = 42  # Determined's default for a job without resources.priority (pool default_priority first)
MIN_PRIORITY, MAX_PRIORITY = 1, 99  # 1 runs first

_JOB_NAMESPACE = uuid.UUID("6f1c3c8e-3f5e-4b7a-9a54-2f7d1b0c5e11")


def job_id_of(job_type: str, entity_id: str) -> str:
    """The job id of an entity (an experiment id, a task id): a UUID, stable for the entity's life, as Determined's
    job ids are UUIDs separate from the entity's own id."""
    return str(uuid.uuid5(_JOB_NAMESPACE, f"{job_type}/{entity_id}"))


@dataclasses.dataclass
class Job:
    """One job in the queue, as every source describes it."""

    job_id: str  # job_id_of(type, entity_id)
    type: str  # one of JOB_TYPES
    entity_id: str  # the experiment id ("12") or the task id
    name: str
    username: str  # the owner
    workspace_id: Optional[int]
    resource_pool: str
    submission_time: datetime.datetime  # UTC, naive
    priority: int  # resources.priority, else the pool's default_priority
    weight: float  # resources.weight (fair share)
    requested_slots: int  # the slots it wants now (running + waiting work)
    allocated_slots: int  # the slots it holds now
    is_preemptible: bool  # experiments: per the pool's scheduler; interactive tasks: never
    state: str  # STATE_QUEUED (nothing running) or STATE_SCHEDULED (something of it runs, zero-slot included)
    queue_position: Optional[float] = None  # set by --ahead-of/--behind-of; None: by submission time
    progress: Optional[float] = None


def queue_order(job: Job) -> Tuple[int, float, str]:
    """The priority scheduler's order: priority, then queue position (else submission time), then job id."""
    position = job.queue_position if job.queue_position is not None else job.submission_time.timestamp()
    return (job.priority, position, job.job_id)


class JobSource(Protocol):
    """One kind of job: lists them and applies the updates of `POST /api/v1/job-queues`."""

    job_types: Sequence[str]  # the types of the jobs it lists

    def jobs(self, s: Session) -> List[Job]:
        """Every active job of this kind (ended ones are not listed)."""
        ...

    def owner_of(self, s: Session, job: Job) -> str:
        """The username allowed (besides an admin) to update the job."""
        ...

    def set_priority(self, s: Session, job: Job, priority: int) -> None: ...

    def set_weight(self, s: Session, job: Job, weight: float) -> None: ...

    def set_queue_position(self, s: Session, job: Job, position: float) -> None:
        """Place the job among those of its priority (`--ahead-of/--behind-of`); experiments keep it in the
        database (queue_positions.py), so it outlives a restart of the master."""
        ...

    def set_resource_pool(self, s: Session, job: Job, pool: str) -> None:
        """Move the job to another pool (Determined: experiments only; a source whose jobs cannot move raises
        RequestProblem(400) naming why)."""
        ...


_SOURCES: Dict[str, JobSource] = {}


def register_source(source: JobSource) -> None:
    """Add a kind of job to the queue (idempotent per job type: a later registration of a type replaces it)."""
    for job_type in source.job_types:
        if job_type not in JOB_TYPES:
            raise ValueError(f"unknown job type {job_type!r}; expected one of {', '.join(JOB_TYPES)}")
        _SOURCES[job_type] = source


def sources() -> List[JobSource]:
    """The registered sources, each once."""
    seen: List[JobSource] = []
    for source in _SOURCES.values():
        if not any(source is other for other in seen):
            seen.append(source)
    return seen


def all_jobs(s: Session) -> List[Job]:
    """Every active job of every source, in queue order."""
    out: List[Job] = []
    for source in sources():
        out.extend(source.jobs(s))
    return sorted(out, key=queue_order)


def source_of(job: Job) -> JobSource:
    return _SOURCES[job.type]
