"""Routes a trial process uses: pull its context and operations, report metrics, checkpoints and exits."""
import asyncio
from typing import Any, Callable, Dict

from fastapi import APIRouter, Request, Response
from sqlalchemy import delete
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from determined.config import redaction
from determined.master.lifecycle import allocations, protocol
from determined.master.security import auth
from determined.master.registry import trial_sources
from determined.master.storage import access as storage_access
from determined.master.api._deps import http_error, master_of, problems_as_http
from determined.master.api.schemas._base import Empty, fields_of
from determined.master.api.schemas.trial_protocol import (BestValidation, CheckpointReport, CompletedOperation,
                                                         CompletedOperationAnswer, EarlyExit, GroupMetricsReport,
                                                         PreemptionSignal, ProgressReport, RunMetadata,
                                                         RunMetadataUpdate, RunnerStatus, SearcherOperation,
                                                         SourceInfoReport, TrainingMetricsBody, TrialContext,
                                                         TrialSourceInfoAnswer, ValidationMetricsReport,
                                                         ValidationReported)
from determined.master.problems import RequestProblem
from determined.master.db import TrainingMetrics, Trial, ValidationMetrics
from determined.master.lifecycle.experiment import get_trial
from determined.master.master import WAKE_IF_NEEDED

router = APIRouter()


def _read(request: Request, trial_id: int, answer: Callable[[Session, Trial], Dict[str, Any]]) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        trial = get_trial(s, trial_id)
        auth.check_trial_reporter(auth.principal_of(request), s, trial, write=False)
        return answer(s, trial)


def _write(request: Request, trial_id: int, body: Dict[str, Any],
           handler: Callable[[Session, Trial, Dict[str, Any]], Dict[str, Any]], *,
           wake: "bool | str" = True) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write(wake=wake) as s:
        trial = get_trial(s, trial_id)
        auth.check_trial_reporter(auth.principal_of(request), s, trial, write=True)
        return handler(s, trial, body)


def _replacing(table: Any, handler: Callable[[Session, Trial, Dict[str, Any]], Dict[str, Any]]
               ) -> Callable[[Session, Trial, Dict[str, Any]], Dict[str, Any]]:
    """A metrics report replaces the trial's record at the same step: a run restarted from a checkpoint (after a
    crash, or a master killed between a report and the next checkpoint) reports that step again."""
    def report(s: Session, trial: Trial, body: Dict[str, Any]) -> Dict[str, Any]:
        steps = body.get("steps_completed") if isinstance(body, dict) else None
        if isinstance(steps, int) and not isinstance(steps, bool):
            s.execute(delete(table).where(table.trial_id == trial.id, table.steps_completed == steps))
        return handler(s, trial, body)

    return report


@router.get("/trials/{trial_id}/context", response_model=TrialContext, response_model_exclude_unset=True)
def trial_context(request: Request, trial_id: int, with_model_def: bool = False,
                  with_operation: bool = False) -> Dict[str, Any]:
    """The trial's context; its config's secrets only for the trial's own process (config/redaction.py).

    What a run starts with comes in the same answer when asked for, saving it a round trip each: `with_model_def`,
    the experiment's model definition (`model_def`, as `GET /experiments/{id}/model_def` answers it);
    `with_operation`, the trial's searcher operation (`searcher_operation`, as `GET .../searcher/operation`
    answers it) and whether its run is asked to stop (`preempt`, as `GET /allocations/{id}/signals/preemption`)."""
    def answer(s: Session, trial: Trial) -> Dict[str, Any]:
        master = master_of(request)
        context = protocol.run_start_context(s, trial, cluster_id=master.cluster_id, data_dir=str(master.data_dir),
                                             with_model_def=with_model_def, with_operation=with_operation)
        principal = auth.principal_of(request)
        if not (principal.is_trial and principal.trial_id == trial.id):
            context["config"] = redaction.experiment_config(context["config"])
        return context

    return _read(request, trial_id, answer)


@router.get("/trials/{trial_id}/searcher/operation", response_model=SearcherOperation,
            response_model_exclude_unset=True)
def searcher_operation(request: Request, trial_id: int) -> Dict[str, Any]:
    return _read(request, trial_id, protocol.next_operation)


@router.post("/trials/{trial_id}/searcher/completed_operation", response_model=CompletedOperationAnswer,
             response_model_exclude_unset=True)
def completed_operation(request: Request, trial_id: int, body: CompletedOperation) -> Dict[str, Any]:
    return _write(request, trial_id, fields_of(body), protocol.complete_operation, wake=WAKE_IF_NEEDED)


@router.post("/trials/{trial_id}/training_metrics", response_model=Empty)
async def training_metrics(request: Request, trial_id: int, report: TrainingMetricsBody = None) -> Response:
    """The hot path: a trial's own run reports without a thread hop; reports waiting together share a commit."""
    if report is None:
        raise http_error(RequestProblem(400, "the request body must be a JSON object"))
    body = fields_of(report)
    principal = getattr(request.state, "principal", None)
    if principal is not None and principal.is_trial and principal.trial_id == trial_id:
        with problems_as_http():
            report = protocol.training_report(trial_id, principal.token, body)
        future = master_of(request).group_commit(protocol.store_training_reports, "training-metrics").submit(report)
        try:
            await asyncio.wrap_future(future)
        except RequestProblem as e:
            raise http_error(e) from None
        return Response(b"{}", media_type="application/json")
    # users (the experiment's owner or an admin) report through the ordinary transaction
    await run_in_threadpool(_write, request, trial_id, body, _replacing(TrainingMetrics, protocol.report_training),
                            wake=False)  # nothing to schedule
    return Response(b"{}", media_type="application/json")


@router.post("/trials/{trial_id}/validation_metrics", response_model=ValidationReported)
def validation_metrics(request: Request, trial_id: int, body: ValidationMetricsReport) -> Dict[str, Any]:
    return _write(request, trial_id, fields_of(body), _replacing(ValidationMetrics, protocol.report_validation),
                  wake=WAKE_IF_NEEDED)


@router.post("/trials/{trial_id}/checkpoints", response_model=Empty)
def checkpoints(request: Request, trial_id: int, body: CheckpointReport) -> Dict[str, Any]:
    def report(s: Session, trial: Trial, fields: Dict[str, Any]) -> Dict[str, Any]:
        storage_access.check_reported(master_of(request), s, trial, fields)  # never a planted link
        return protocol.report_checkpoint(s, trial, fields)

    return _write(request, trial_id, fields_of(body), report)


@router.post("/trials/{trial_id}/early_exit", response_model=Empty)
def early_exit(request: Request, trial_id: int, body: EarlyExit) -> Dict[str, Any]:
    return _write(request, trial_id, fields_of(body), protocol.early_exit)


@router.get("/allocations/{allocation_id}/signals/preemption", response_model=PreemptionSignal)
def preemption(request: Request, allocation_id: str) -> Dict[str, Any]:
    with master_of(request).read() as s:
        return protocol.preemption_signal(s, allocation_id)


@router.post("/allocations/{allocation_id}/signals/ack_preemption", response_model=Empty)
def ack_preemption(request: Request, allocation_id: str) -> Dict[str, Any]:
    """The run acknowledges the preemption signal: its exit 0 then means "resume me later" (Determined 0.38)."""
    with problems_as_http(), master_of(request).write(wake=False) as s:
        trial = allocations.running_trial(s, allocation_id)
        if trial is None:
            return {}
        auth.check_trial_reporter(auth.principal_of(request), s, trial, write=True)
        return protocol.acknowledge_preemption(s, allocation_id)


@router.post("/trials/{trial_id}/metrics", response_model=Empty)
def group_metrics(request: Request, trial_id: int, body: GroupMetricsReport) -> Dict[str, Any]:
    """`{group, steps_completed, metrics}`: metrics of a group other than training and validation."""
    return _write(request, trial_id, fields_of(body), protocol.report_group_metrics, wake=False)


@router.post("/trials/{trial_id}/progress", response_model=Empty)
def progress(request: Request, trial_id: int, body: ProgressReport) -> Dict[str, Any]:
    """`{progress: 0..1}` (`report_progress`)."""
    return _write(request, trial_id, fields_of(body), protocol.report_progress, wake=False)


@router.post("/trials/{trial_id}/runner/metadata", response_model=Empty)
def runner_metadata(request: Request, trial_id: int, body: RunnerStatus) -> Dict[str, Any]:
    """`{state: "text"}` (`set_status`)."""
    return _write(request, trial_id, fields_of(body), protocol.set_runner_status, wake=False)


@router.post("/trials/{trial_id}/run_metadata", response_model=RunMetadata)
def set_run_metadata(request: Request, trial_id: int, body: RunMetadataUpdate) -> Dict[str, Any]:
    """`{metadata: {...}}` (`set_metadata`): merged into the trial's metadata."""
    return _write(request, trial_id, fields_of(body), protocol.set_run_metadata, wake=False)


@router.get("/trials/{trial_id}/run_metadata", response_model=RunMetadata)
def get_run_metadata(request: Request, trial_id: int) -> Dict[str, Any]:
    return _read(request, trial_id, protocol.run_metadata)


@router.get("/trials/{trial_id}/searcher/best_validation", response_model=BestValidation)
def best_validation(request: Request, trial_id: int) -> Dict[str, Any]:
    """`{metric}`: the best searcher metric of the trial's experiment; 404 while there is none."""
    return _read(request, trial_id, protocol.best_searcher_validation)


@router.delete("/trials/{trial_id}/checkpoints/{uuid}", response_model=Empty)
def delete_checkpoint(request: Request, trial_id: int, uuid: str) -> Dict[str, Any]:
    """The trial deletes one of its checkpoints (`CheckpointContext.delete`); its files are removed after this."""
    return _write(request, trial_id, {}, lambda s, trial, _body: protocol.delete_own_checkpoint(s, trial, uuid))


@router.post("/trials/{trial_id}/source_info", response_model=TrialSourceInfoAnswer)
def source_info(request: Request, trial_id: int, body: SourceInfoReport) -> Dict[str, Any]:
    """`{checkpoint_uuid}` or `{model_id, model_version}` (and `kind`, INFERENCE by default): the trial used that
    checkpoint or model version (`core_context.experimental.report_task_using_*`); only for the trial itself (its
    own token), its experiment's owner or an admin."""
    return _write(request, trial_id, fields_of(body), trial_sources.report, wake=False)
