"""The queue positions `det job update --ahead-of/--behind-of` set (Determined <= 0.34), kept in the database
(table `job_queue_positions`, migration 0017) so that a restarted master keeps the order users gave its queue.

A position orders a job among the jobs of its priority in its pool instead of its submission time (both are seconds
since the epoch, so moved and unmoved jobs compare). A job that ends leaves its row behind until the next move
prunes the rows of jobs no longer in the queue.
"""
from typing import Dict, Iterable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from determined.master.db.models import JobQueuePosition


def all_positions(s: Session) -> Dict[str, float]:
    """Job id -> its queue position, for every job moved with --ahead-of/--behind-of (one query)."""
    return {job_id: float(position) for job_id, position in s.execute(
        select(JobQueuePosition.job_id, JobQueuePosition.position))}


def set_position(s: Session, job_id: str, position: float) -> None:
    row = s.get(JobQueuePosition, job_id)
    if row is None:
        s.add(JobQueuePosition(job_id=job_id, position=position))
    else:
        row.position = position
    s.flush()


def prune(s: Session, active_job_ids: Iterable[str]) -> None:
    """Forget the positions of jobs that are no longer in the queue (ended, deleted)."""
    keep = set(active_job_ids)
    stale = [job_id for job_id in s.scalars(select(JobQueuePosition.job_id)) if job_id not in keep]
    for start in range(0, len(stale), 500):
        s.execute(delete(JobQueuePosition).where(JobQueuePosition.job_id.in_(stale[start:start + 500])))
