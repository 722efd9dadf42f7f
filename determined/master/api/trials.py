"""Trial routes of the CLI and SDK: describe, logs, kill, checkpoints."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy import select

from determined.master import actions, auth, registry, serialize
from determined.master.api._deps import json_list, json_response, master_of, problems_as_http
from determined.master.db import Checkpoint, TrainingMetrics, TrialLog, ValidationMetrics
from determined.master.experiment import get_trial

router = APIRouter()


@router.get("/trials/{trial_id}")
def describe_trial(request: Request, trial_id: int) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        trial = get_trial(s, trial_id)
        training = s.scalars(select(TrainingMetrics).where(TrainingMetrics.trial_id == trial_id)
                             .order_by(TrainingMetrics.steps_completed, TrainingMetrics.id))
        validation = s.scalars(select(ValidationMetrics).where(ValidationMetrics.trial_id == trial_id)
                               .order_by(ValidationMetrics.steps_completed, ValidationMetrics.id))
        checkpoints = s.scalars(select(Checkpoint).where(Checkpoint.trial_id == trial_id).order_by(Checkpoint.id))
        return json_response(lambda: {
            "trial": serialize.trial(trial),
            "training_metrics": serialize.training_metrics(list(training)),
            "validation_metrics": serialize.validation_metrics(list(validation)),
            "checkpoints": [serialize.checkpoint(s, c) for c in checkpoints],
        }, f"trial {trial_id}")


@router.get("/trials/{trial_id}/logs")
def trial_logs(request: Request, trial_id: int, offset: int = Query(0, ge=0),
               limit: int = Query(1000, ge=1, le=10000)) -> Dict[str, Any]:
    """Log lines in the order they were captured; `offset` counts lines, `next_offset` continues after these."""
    with problems_as_http(), master_of(request).read() as s:
        trial = get_trial(s, trial_id)
        rows = list(s.scalars(select(TrialLog).where(TrialLog.trial_id == trial_id)
                              .order_by(TrialLog.id).offset(offset).limit(limit)))
        return {
            "logs": [{"id": r.id, "timestamp": serialize.timestamp(r.timestamp), "stream": r.stream, "message": r.message}
                     for r in rows],
            "next_offset": offset + len(rows),
            "trial_state": trial.state,
        }


@router.post("/trials/{trial_id}/kill", dependencies=[Depends(auth.trial_owner_only)])
def kill_trial(request: Request, trial_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        trial = actions.kill_trial(s, trial_id)
        return {"trial": serialize.trial(trial)}


@router.get("/trials/{trial_id}/checkpoints")
def trial_checkpoints(request: Request, trial_id: int,
                      states: Optional[List[str]] = Query(default=None)) -> Response:
    """The trial's checkpoints ordered by steps_completed, then id; `states` filters (repeatable)."""
    with problems_as_http(), master_of(request).read() as s:
        get_trial(s, trial_id)
        wanted = registry.check_checkpoint_states(states)
        query = select(Checkpoint).where(Checkpoint.trial_id == trial_id)
        if wanted:
            query = query.where(Checkpoint.state.in_(wanted))
        rows = s.scalars(query.order_by(Checkpoint.steps_completed, Checkpoint.id))
        return json_list("checkpoints", rows, lambda c: serialize.checkpoint(s, c), lambda c: c.uuid)
