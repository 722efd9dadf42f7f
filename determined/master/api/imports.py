"""Import routes (`det import determined`, admin only): one typed batch of a source Determined cluster's rows per
request, written in one transaction by determined/master/imports/determined.py; the progress of a source."""
from typing import Any, Dict

from fastapi import APIRouter, Query, Request

from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas import imports as schemas
from determined.master.imports import determined as importer
from determined.master.security import auth

router = APIRouter()


def _admin(request: Request) -> None:
    auth.check_admin(auth.principal_of(request), "import a cluster's history")


def _rows(body: Any) -> Any:
    return [row.model_dump() for row in body.rows]


def _write(request: Request, kind: str, body: Any) -> Dict[str, Any]:
    with problems_as_http():
        _admin(request)
        with master_of(request).write(wake=False) as s:
            result = importer.ROW_KINDS[kind](s, body.source, _rows(body), body.dry_run)
            return result.to_json()


def _write_logs(request: Request, body: Any) -> Dict[str, Any]:
    with problems_as_http():
        _admin(request)
        with master_of(request).write(wake=False) as s:
            result = importer.import_logs(s, body.source, body.table, _rows(body), body.dry_run)
            return result.to_json()


_ANSWER: Dict[str, Any] = {"response_model": schemas.ImportBatchAnswer}


@router.post("/imports/determined/users", **_ANSWER)
def import_users(request: Request, body: schemas.UsersBatch) -> Dict[str, Any]:
    """Users: names, admin flag, active; never a password (an admin gives one)."""
    return _write(request, "users", body)


@router.post("/imports/determined/workspaces", **_ANSWER)
def import_workspaces(request: Request, body: schemas.WorkspacesBatch) -> Dict[str, Any]:
    return _write(request, "workspaces", body)


@router.post("/imports/determined/projects", **_ANSWER)
def import_projects(request: Request, body: schemas.ProjectsBatch) -> Dict[str, Any]:
    return _write(request, "projects", body)


@router.post("/imports/determined/experiments", **_ANSWER)
def import_experiments(request: Request, body: schemas.ExperimentsBatch) -> Dict[str, Any]:
    """Experiments; one that had not finished becomes CANCELED with a note (it never runs here)."""
    return _write(request, "experiments", body)


@router.post("/imports/determined/trials", **_ANSWER)
def import_trials(request: Request, body: schemas.TrialsBatch) -> Dict[str, Any]:
    return _write(request, "trials", body)


@router.post("/imports/determined/metrics", **_ANSWER)
def import_metrics(request: Request, body: schemas.MetricsBatch) -> Dict[str, Any]:
    """Metric rows of one source table, in increasing source id (a watermark per table makes re-runs skip them).
    Columnar (`columns` + `rows` of cells): the rows go to the writer as the validated tuples, no model per row."""
    with problems_as_http():
        _admin(request)
        with master_of(request).write(wake=False) as s:
            return importer.import_metrics(s, body.source, body.table, body.partition, body.rows,
                                           body.dry_run).to_json()


@router.post("/imports/determined/checkpoints", **_ANSWER)
def import_checkpoints(request: Request, body: schemas.CheckpointsBatch) -> Dict[str, Any]:
    """Checkpoints: pointed at where they are (their experiment's checkpoint storage), never copied."""
    return _write(request, "checkpoints", body)


@router.post("/imports/determined/models", **_ANSWER)
def import_models(request: Request, body: schemas.ModelsBatch) -> Dict[str, Any]:
    return _write(request, "models", body)


@router.post("/imports/determined/model_versions", **_ANSWER)
def import_model_versions(request: Request, body: schemas.ModelVersionsBatch) -> Dict[str, Any]:
    return _write(request, "model_versions", body)


@router.post("/imports/determined/logs", **_ANSWER)
def import_logs(request: Request, body: schemas.LogsBatch) -> Dict[str, Any]:
    """Trial log lines of the source's task_logs, in increasing source id."""
    return _write_logs(request, body)


@router.get("/imports/determined/progress", response_model=schemas.ImportProgress)
def import_progress(request: Request, source: str = Query(min_length=1, max_length=128)) -> Dict[str, Any]:
    """What this master holds of the source cluster `source`: where a re-run continues."""
    with problems_as_http():
        _admin(request)
        with master_of(request).read() as s:
            return importer.progress(s, source)
