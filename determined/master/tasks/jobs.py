"""Interactive tasks in the job queue (determined/master/scheduling/jobs.py): one job per active task, never
preemptible; `det job update` sets its priority."""
from typing import List, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.db.models import Task
from determined.master.scheduling import jobs as queue
from determined.master.tasks import states

_TYPES = {states.COMMAND: queue.TYPE_COMMAND, states.NOTEBOOK: queue.TYPE_NOTEBOOK,
          states.TENSORBOARD: queue.TYPE_TENSORBOARD, states.SHELL: queue.TYPE_SHELL}


class TaskJobs:
    job_types: Sequence[str] = (queue.TYPE_COMMAND, queue.TYPE_NOTEBOOK, queue.TYPE_TENSORBOARD, queue.TYPE_SHELL)

    def jobs(self, s: Session) -> List[queue.Job]:
        out = []
        for task in s.scalars(select(Task).where(Task.state.in_(states.ACTIVE))):
            job_type = _TYPES[task.task_type]
            held = task.state in states.HOLDING
            out.append(queue.Job(
                job_id=queue.job_id_of(job_type, task.id), type=job_type, entity_id=task.id,
                name=task.description, username=task.owner, workspace_id=task.workspace_id,
                resource_pool=task.resource_pool, submission_time=task.registered_time,
                priority=task.priority if task.priority is not None else queue.DEFAULT_PRIORITY, weight=1.0,
                requested_slots=task.slots, allocated_slots=task.slots if held else 0, is_preemptible=False,
                state=queue.STATE_SCHEDULED if held else queue.STATE_QUEUED))
        return out

    def owner_of(self, s: Session, job: queue.Job) -> str:
        task = s.get(Task, job.entity_id)
        return task.owner if task is not None else ""

    def set_priority(self, s: Session, job: queue.Job, priority: int) -> None:
        task = s.get(Task, job.entity_id)
        if task is not None:
            task.priority = priority

    def set_weight(self, s: Session, job: queue.Job, weight: float) -> None:
        del s, job, weight  # tasks have no share of a fair-share pool to change

    def set_queue_position(self, s: Session, job: queue.Job, position: float) -> None:
        del s, job, position  # a queued task waits by priority, then submission time


def register() -> None:
    queue.register_source(TaskJobs())
