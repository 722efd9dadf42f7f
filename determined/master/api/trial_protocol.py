"""Routes a trial process uses: pull its context and operations, report metrics, checkpoints and exits."""
from typing import Any, Callable, Dict

from fastapi import APIRouter, Body, Request
from sqlalchemy.orm import Session

from determined.master import protocol
from determined.master.api._deps import bearer_token, master_of, problems_as_http
from determined.master.db import Trial
from determined.master.experiment import get_trial

router = APIRouter()


def _read(request: Request, trial_id: int, answer: Callable[[Session, Trial], Dict[str, Any]]) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        trial = get_trial(s, trial_id)
        protocol.authorize(trial, bearer_token(request))
        return answer(s, trial)


def _write(request: Request, trial_id: int, body: Dict[str, Any],
           handler: Callable[[Session, Trial, Dict[str, Any]], Dict[str, Any]]) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        trial = get_trial(s, trial_id)
        protocol.authorize(trial, bearer_token(request))
        return handler(s, trial, body)


@router.get("/trials/{trial_id}/context")
def trial_context(request: Request, trial_id: int) -> Dict[str, Any]:
    return _read(request, trial_id, protocol.trial_context)


@router.get("/trials/{trial_id}/searcher/operation")
def searcher_operation(request: Request, trial_id: int) -> Dict[str, Any]:
    return _read(request, trial_id, protocol.next_operation)


@router.post("/trials/{trial_id}/searcher/completed_operation")
def completed_operation(request: Request, trial_id: int, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    return _write(request, trial_id, body, protocol.complete_operation)


@router.post("/trials/{trial_id}/training_metrics")
def training_metrics(request: Request, trial_id: int, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    return _write(request, trial_id, body, protocol.report_training)


@router.post("/trials/{trial_id}/validation_metrics")
def validation_metrics(request: Request, trial_id: int, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    return _write(request, trial_id, body, protocol.report_validation)


@router.post("/trials/{trial_id}/checkpoints")
def checkpoints(request: Request, trial_id: int, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    return _write(request, trial_id, body, protocol.report_checkpoint)


@router.post("/trials/{trial_id}/early_exit")
def early_exit(request: Request, trial_id: int, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    return _write(request, trial_id, body, protocol.early_exit)


@router.get("/allocations/{allocation_id}/signals/preemption")
def preemption(request: Request, allocation_id: str) -> Dict[str, Any]:
    with master_of(request).read() as s:
        return protocol.preemption_signal(s, allocation_id)
