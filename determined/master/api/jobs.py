"""GET /job-queues (the queue, in scheduling order) and POST /job-queues (`det job update`)."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Query, Request

from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas.jobs import JobQueue, JobQueueUpdated, UpdateJobQueueRequest
from determined.master.problems import RequestProblem
from determined.master.scheduling import experiment_jobs  # noqa: F401  (registers the experiments' jobs)
from determined.master.scheduling import jobs, pools, queue_updates, wait_reasons
from determined.master.security import auth

router = APIRouter()
MAX_LIMIT = 1000


def render(job: jobs.Job, ahead: int) -> Dict[str, Any]:
    return {
        "job_id": job.job_id, "entity_id": job.entity_id, "type": job.type, "name": job.name,
        "username": job.username, "workspace_id": job.workspace_id, "resource_pool": job.resource_pool,
        "submission_time": job.submission_time.isoformat() + "Z", "priority": job.priority,
        "weight": job.weight, "requested_slots": job.requested_slots, "allocated_slots": job.allocated_slots,
        "is_preemptible": job.is_preemptible, "progress": job.progress,
        "summary": {"state": job.state, "jobs_ahead": ahead},
    }


def _runs(request: Request) -> Dict[str, Any]:
    """The resource manager's runs (allocation id -> run); none when no scheduler runs."""
    rm = master_of(request).rm
    return dict(rm.running()) if rm is not None else {}


@router.get("/job-queues", response_model=JobQueue)
def get_job_queue(request: Request, resource_pool: Optional[str] = Query(None, max_length=256),
                  offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=MAX_LIMIT),
                  order_by: str = Query("asc", pattern="^(asc|desc)$")) -> Dict[str, Any]:
    """The active jobs of `resource_pool` (every pool when not given), in scheduling order (`order_by=desc`:
    reversed); `offset`/`limit` page through them."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        with master.read() as s:
            cluster = pools.of_session(s)
            if resource_pool is not None:
                problem = cluster.check_pool(resource_pool)
                if problem:
                    raise RequestProblem(400, problem.replace("resources.resource_pool", "resource_pool"))
            every = jobs.all_jobs(s)
            ahead = queue_updates.jobs_ahead(every)
            listed = [j for j in every if resource_pool is None or j.resource_pool == resource_pool]
            if order_by == "desc":
                listed.reverse()
            page = listed[offset:offset + limit]
            why = wait_reasons.waiting_reasons(s, page, ahead, _runs(request))
    return {"jobs": [dict(render(j, ahead[j.job_id]), waiting_reason=why[j.job_id]) for j in page],
            "total": len(listed)}


@router.post("/job-queues", response_model=JobQueueUpdated)
def update_job_queue(request: Request, body: UpdateJobQueueRequest) -> Dict[str, Any]:
    """Apply `{"updates": [{"job_id", one of priority | weight | resource_pool | ahead_of | behind_of}]}`, all or
    none; only the job's owner or an admin may update it."""
    master = master_of(request)
    with problems_as_http():
        principal = auth.principal_of(request)
        if principal.is_trial:
            raise RequestProblem(403, "a trial's token cannot update the job queue")
        updated: List[str] = []
        with master.write() as s:
            for control in body.updates:
                updated.append(queue_updates.apply(s, principal, queue_updates.Update(**control.model_dump())))
        with master.read() as s:
            every = jobs.all_jobs(s)
            ahead = queue_updates.jobs_ahead(every)
            by_id = {j.job_id: j for j in every}
            shown = [by_id[i] for i in dict.fromkeys(updated) if i in by_id]
            why = wait_reasons.waiting_reasons(s, shown, ahead, _runs(request))
    return {"jobs": [dict(render(j, ahead[j.job_id]), waiting_reason=why[j.job_id]) for j in shown]}
