"""Trial routes of the CLI and SDK: describe, logs, kill, checkpoints."""
from typing import Any, Dict

from fastapi import APIRouter, Depends, Request

from determined.master.lifecycle import actions
from determined.master.security import auth
from determined.master.views import serialize
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas.trials import TrialAnswer
from determined.master.lifecycle.experiment import get_experiment

router = APIRouter()


@router.post("/trials/{trial_id}/kill", response_model=TrialAnswer, dependencies=[Depends(auth.trial_owner_only)])
def kill_trial(request: Request, trial_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        trial = actions.kill_trial(s, trial_id)
        return {"trial": serialize.trials(s, get_experiment(s, trial.experiment_id), [trial])[0]}


