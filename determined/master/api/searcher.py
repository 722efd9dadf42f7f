"""The routes of a custom search's runner (Determined 0.19.6 to 0.37): fetch the search's events, post the
operations that answer them. Owner-only: the runner acts for the experiment's owner."""
import time
from typing import Any, Dict, Optional

from fastapi import APIRouter, Depends, Query, Request

from determined.master.security import auth
from determined.master.lifecycle import custom_search
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.experiments import OperationsTaken, SearcherEvents, SearcherOperationsRequest
from determined.master.lifecycle.experiment import get_experiment

router = APIRouter()

# A runner waits for events with a long poll: the answer comes as soon as there are events, or after this long.
MAX_WAIT_S = 30.0
_POLL_S = 0.05


@router.get("/experiments/{experiment_id}/searcher_events", response_model=SearcherEvents,
            response_model_exclude_unset=True, dependencies=[Depends(auth.experiment_owner_only)])
def searcher_events(request: Request, experiment_id: int,
                    timeout_seconds: float = Query(0.0, ge=0.0, le=MAX_WAIT_S)) -> Dict[str, Any]:
    """`{"searcherEvents": [...]}`: the events not acknowledged yet, then `experimentInactive` when the experiment is
    paused or over; with `timeout_seconds`, waits up to that long while there is none."""
    master = master_of(request)
    deadline = time.monotonic() + timeout_seconds
    with problems_as_http():
        while True:
            with master.read() as s:
                events = custom_search.runner_events(get_experiment(s, experiment_id))
            if events or time.monotonic() >= deadline:
                return {"searcherEvents": events}
            time.sleep(_POLL_S)


@router.post("/experiments/{experiment_id}/searcher_operations", response_model=OperationsTaken,
             dependencies=[Depends(auth.experiment_owner_only)])
def searcher_operations(request: Request, experiment_id: int,
                        body: Optional[SearcherOperationsRequest] = None) -> Dict[str, Any]:
    """Carry out the operations that answer one event: `{searcherOperations: [...], triggeredByEvent: {id}}`."""
    master = master_of(request)
    with problems_as_http(), master.write() as s:
        taken = custom_search.post_operations(s, get_experiment(s, experiment_id),
                                              fields_of(body) if body is not None else None)
    return {"taken": taken}
