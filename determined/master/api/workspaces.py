"""Workspace and project routes (determined/master/registry/workspaces.py has the rules): create, list, describe, rename,
archive, unarchive, delete; the experiments of a project; moving an experiment to another project."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, Body, HTTPException, Request
from fastapi.responses import Response
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.views import serialize
from determined.master.registry import workspaces
from determined.master.api._deps import http_error, json_list, master_of, problems_as_http
from determined.master.views.dbread import reader_of
from determined.master.views.workspace_reads import project_json, workspace_json
from determined.master.views import workspace_reads as wreads
from determined.master.lifecycle.experiment import get_experiment
from determined.master.problems import RequestProblem

router = APIRouter()


def _taken(what: str) -> HTTPException:
    """A unique name taken between the check and the insert (another process): 409."""
    return http_error(RequestProblem(409, f"{what} was taken by another request at the same time; choose another name"))


# ---------------------------------------------------------------- workspaces


@router.get("/workspaces")
def list_workspaces(request: Request, name: str = "", archived: Optional[str] = None) -> Response:
    """`{"workspaces": [...]}`, by id; `name` keeps the one of that name, `archived` those (not) archived."""
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*wreads.workspaces(reader_of(s), name, archived))


@router.post("/workspaces")
def create_workspace(request: Request, body: Any = Body(None)) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            ws = workspaces.create_workspace(s, body, auth.principal_of(request))
            return {"workspace": workspace_json(s, ws)}
    except IntegrityError:
        raise _taken("the workspace name") from None


@router.get("/workspaces/{workspace_id}")
def get_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return wreads.workspace(reader_of(s), workspace_id)


@router.patch("/workspaces/{workspace_id}")
def patch_workspace(request: Request, workspace_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Rename (`{"name"}`): the owner or an admin."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            ws = workspaces.update_workspace(s, workspace_id, body, auth.principal_of(request))
            return {"workspace": workspace_json(s, ws)}
    except IntegrityError:
        raise _taken("the workspace name") from None


@router.delete("/workspaces/{workspace_id}")
def delete_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        workspaces.delete_workspace(s, workspace_id, auth.principal_of(request))
    return {"completed": True}


@router.post("/workspaces/{workspace_id}/archive")
def archive_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    return _set_workspace_archived(request, workspace_id, True)


@router.post("/workspaces/{workspace_id}/unarchive")
def unarchive_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    return _set_workspace_archived(request, workspace_id, False)


def _set_workspace_archived(request: Request, workspace_id: int, archived: bool) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        ws = workspaces.set_workspace_archived(s, workspace_id, archived, auth.principal_of(request))
        return {"workspace": workspace_json(s, ws)}


@router.get("/workspaces/{workspace_id}/projects")
def list_projects(request: Request, workspace_id: int, name: str = "", archived: Optional[str] = None) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*wreads.projects(reader_of(s), workspace_id, name, archived))


@router.post("/workspaces/{workspace_id}/projects")
def create_project(request: Request, workspace_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            project = workspaces.create_project(s, workspace_id, body, auth.principal_of(request))
            return {"project": project_json(s, project)}
    except IntegrityError:
        raise _taken("the project name") from None


# ---------------------------------------------------------------- projects


@router.get("/projects")
def all_projects(request: Request) -> Response:
    """Every project of every workspace, by id (the UI's project filter)."""
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*wreads.projects(reader_of(s)))


@router.get("/projects/{project_id}")
def get_project(request: Request, project_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return wreads.project(reader_of(s), project_id)


@router.patch("/projects/{project_id}")
def patch_project(request: Request, project_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Rename and/or describe (`{"name", "description"}`): the owner or an admin."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            project = workspaces.update_project(s, project_id, body, auth.principal_of(request))
            return {"project": project_json(s, project)}
    except IntegrityError:
        raise _taken("the project name") from None


@router.put("/projects/{project_id}/notes")
def put_project_notes(request: Request, project_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Replace the notes (`{"notes": [{"name", "contents"}...]}`): the owner or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_notes(s, project_id, body, auth.principal_of(request))
        return {"notes": list(project.notes or [])}


@router.post("/projects/{project_id}/notes")
def add_project_note(request: Request, project_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Add one note (`{"name", "contents"}`): the owner or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_notes(s, project_id, body, auth.principal_of(request), append=True)
        return {"notes": list(project.notes or [])}


@router.delete("/projects/{project_id}")
def delete_project(request: Request, project_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        workspaces.delete_project(s, project_id, auth.principal_of(request))
    return {"completed": True}


@router.post("/projects/{project_id}/archive")
def archive_project(request: Request, project_id: int) -> Dict[str, Any]:
    return _set_project_archived(request, project_id, True)


@router.post("/projects/{project_id}/unarchive")
def unarchive_project(request: Request, project_id: int) -> Dict[str, Any]:
    return _set_project_archived(request, project_id, False)


def _set_project_archived(request: Request, project_id: int, archived: bool) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_archived(s, project_id, archived, auth.principal_of(request))
        return {"project": project_json(s, project)}


@router.get("/projects/{project_id}/experiments")
def project_experiments(request: Request, project_id: int) -> Response:
    """The project's experiments, as `GET /experiments` shows them."""
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*wreads.project_experiments(reader_of(s), project_id))


# ---------------------------------------------------------------- experiments


@router.post("/experiments/{experiment_id}/move")
def move_experiment(request: Request, experiment_id: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Move the experiment to another project (`{"project_id"}`, or `{"workspace", "project"}` names)."""
    with problems_as_http(), master_of(request).write() as s:
        exp = workspaces.move_experiment(s, get_experiment(s, experiment_id), body, auth.principal_of(request))
        return {"experiment": serialize.experiment(s, exp)}

