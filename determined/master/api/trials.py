"""Trial routes of the CLI and SDK: describe, logs, kill, checkpoints."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from determined.master.lifecycle import actions
from determined.master.security import auth
from determined.master.views import reads, serialize
from determined.master.api._deps import json_list, json_response, master_of, problems_as_http
from determined.master.views.dbread import reader_of
from determined.master.lifecycle.experiment import get_experiment

router = APIRouter()


@router.get("/trials/{trial_id}")
def describe_trial(request: Request, trial_id: int) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: reads.trial(reader_of(s), trial_id), f"trial {trial_id}")


@router.get("/trials/{trial_id}/metrics")
def trial_metrics(request: Request, trial_id: int, group: str = Query(..., max_length=128),
                  max_points: Optional[str] = Query(None, max_length=32)) -> Response:
    """The trial's metrics of one group (`training`, `validation`, or any group it reported), by steps_completed;
    `max_points` downsamples them to that many points per metric, keeping the extremes (curves.py)."""
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: reads.trial_metrics(reader_of(s), trial_id, group, max_points),
                             f"trial {trial_id}'s {group} metrics")


@router.get("/trials/{trial_id}/logs")
def trial_logs(request: Request, trial_id: int, offset: int = Query(0, ge=0),
               limit: int = Query(1000, ge=1, le=10000)) -> Dict[str, Any]:
    """Log lines in the order they were captured; `offset` counts lines, `next_offset` continues after these."""
    with problems_as_http(), master_of(request).read() as s:
        return reads.trial_logs(reader_of(s), trial_id, offset, limit)


@router.post("/trials/{trial_id}/kill", dependencies=[Depends(auth.trial_owner_only)])
def kill_trial(request: Request, trial_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        trial = actions.kill_trial(s, trial_id)
        return {"trial": serialize.trials(s, get_experiment(s, trial.experiment_id), [trial])[0]}


@router.get("/trials/{trial_id}/checkpoints")
def trial_checkpoints(request: Request, trial_id: int,
                      states: Optional[List[str]] = Query(default=None)) -> Response:
    """The trial's checkpoints ordered by steps_completed, then id; `states` filters (repeatable)."""
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*reads.trial_checkpoints(reader_of(s), trial_id, states))
