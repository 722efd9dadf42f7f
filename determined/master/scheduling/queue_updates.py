"""What `det job update` changes (POST /api/v1/job-queues): a job's priority, weight, pool, or its place in the queue.

`ahead_of`/`behind_of` behave as in Determined 0.20-0.34 (deprecated in 0.33, removed in 0.35): priority scheduler
only; a job moved next to an anchor of another priority first takes the anchor's priority, then its place.
"""
import dataclasses
import math
from typing import Dict, List, Optional

from sqlalchemy.orm import Session

from determined.master.problems import RequestProblem
from determined.master.scheduling import bindings, jobs, pools, queue_positions
from determined.master.security import auth


@dataclasses.dataclass
class Update:
    job_id: str
    priority: Optional[int] = None
    weight: Optional[float] = None
    resource_pool: Optional[str] = None
    ahead_of: Optional[str] = None
    behind_of: Optional[str] = None


def position_of(job: jobs.Job) -> float:
    return job.queue_position if job.queue_position is not None else job.submission_time.timestamp()


def pool_queue(all_jobs: List[jobs.Job], pool: str) -> List[jobs.Job]:
    return sorted((j for j in all_jobs if j.resource_pool == pool), key=jobs.queue_order)


def jobs_ahead(all_jobs: List[jobs.Job]) -> Dict[str, int]:
    """For each job, how many jobs come before it in its pool's queue."""
    out: Dict[str, int] = {}
    by_pool: Dict[str, int] = {}
    for job in sorted(all_jobs, key=jobs.queue_order):
        out[job.job_id] = by_pool.get(job.resource_pool, 0)
        by_pool[job.resource_pool] = out[job.job_id] + 1
    return out


def check_priority(principal: auth.Principal, priority: int, cluster: pools.ClusterPools) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not jobs.MIN_PRIORITY <= priority <= jobs.MAX_PRIORITY:
        raise RequestProblem(400, f"priority: expected an integer from {jobs.MIN_PRIORITY} (runs first) to "
                                  f"{jobs.MAX_PRIORITY}, got {priority!r}")
    problem = cluster.priority_problem(priority, admin=principal.admin)
    if problem:
        raise RequestProblem(403, problem)


def apply(s: Session, principal: auth.Principal, update: Update) -> str:
    """Apply one update (the caller holds a write transaction); returns the job id. Refusals are RequestProblems."""
    current = jobs.all_jobs(s)
    by_id = {j.job_id: j for j in current}
    job = by_id.get(update.job_id)
    if job is None:
        raise RequestProblem(404, f"job {update.job_id!r} is not in the queue (ended jobs are not listed): see "
                                  "`det job list`")
    source = jobs.source_of(job)
    auth.check_owner(principal, source.owner_of(s, job), f"job {job.job_id} ({job.name})", "update", "jobs")
    cluster = pools.of_session(s)
    scheduler = cluster.pool_for(job.resource_pool).scheduler
    if update.priority is not None:
        check_priority(principal, update.priority, cluster)
        source.set_priority(s, job, update.priority)
    elif update.weight is not None:
        if isinstance(update.weight, bool) or not isinstance(update.weight, (int, float)) or not (
                math.isfinite(update.weight) and update.weight > 0):
            raise RequestProblem(400, f"weight: expected a positive number, got {update.weight!r}")
        if scheduler.type != pools.FAIR_SHARE:
            raise RequestProblem(400, f"weight: pool {job.resource_pool!r} uses the {scheduler.type} scheduler; a "
                                      "weight counts only under fair_share: set a priority instead")
        source.set_weight(s, job, float(update.weight))
    elif update.resource_pool is not None:
        if job.type != jobs.TYPE_EXPERIMENT:
            raise RequestProblem(400, f"setting resource pool for job type {job.type} is not supported (only "
                                      "experiments move between pools)")
        # the pool must exist and be available to the job's workspace (bindings)
        problem = bindings.unavailable_problem(s, cluster, update.resource_pool, job.workspace_id)
        if problem:
            raise RequestProblem(400, problem)
        source.set_resource_pool(s, job, update.resource_pool)
    else:
        _move(s, principal, job, by_id, current, update, scheduler, cluster)
    return job.job_id


def _move(s: Session, principal: auth.Principal, job: jobs.Job, by_id: Dict[str, jobs.Job],
          current: List[jobs.Job], update: Update, scheduler: pools.SchedulerConfig,
          cluster: pools.ClusterPools) -> None:
    ahead = update.ahead_of is not None
    flag = "--ahead-of" if ahead else "--behind-of"
    anchor_id = update.ahead_of if ahead else update.behind_of
    anchor = by_id.get(str(anchor_id))
    if anchor is None:
        raise RequestProblem(404, f"{flag}: job {anchor_id!r} is not in the queue: see `det job list`")
    if anchor.job_id == job.job_id:
        raise RequestProblem(400, f"{flag}: a job cannot move relative to itself")
    if anchor.resource_pool != job.resource_pool:
        raise RequestProblem(400, f"{flag}: job {anchor.job_id} is in pool {anchor.resource_pool!r}, job "
                                  f"{job.job_id} in {job.resource_pool!r}; a job moves only within its pool's queue")
    if scheduler.type != pools.PRIORITY:
        raise RequestProblem(400, f"{flag}: pool {job.resource_pool!r} uses the {scheduler.type} scheduler; moving a "
                                  "job in the queue works only with the priority scheduler (Determined 0.20-0.34)")
    source = jobs.source_of(job)
    if anchor.priority != job.priority:  # Determined 0.34: the moved job first takes the anchor's priority
        check_priority(principal, anchor.priority, cluster)
        source.set_priority(s, job, anchor.priority)
    same = [j for j in pool_queue(current, job.resource_pool) if j.priority == anchor.priority and j.job_id != job.job_id]
    index = next(i for i, j in enumerate(same) if j.job_id == anchor.job_id)
    anchor_pos = position_of(anchor)
    if ahead:
        neighbour = position_of(same[index - 1]) if index > 0 else anchor_pos - 2.0
        position = (neighbour + anchor_pos) / 2
    else:
        neighbour = position_of(same[index + 1]) if index + 1 < len(same) else anchor_pos + 2.0
        position = (anchor_pos + neighbour) / 2
    source.set_queue_position(s, job, position)
    queue_positions.prune(s, by_id)  # the rows of jobs that ended since
