"""Workspace and project routes (determined/master/registry/workspaces.py has the rules): create, list, describe, rename,
archive, unarchive, delete; a workspace's default and available resource pools (scheduling/bindings.py); the
experiments of a project; moving an experiment to another project."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, HTTPException, Request
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.views import serialize
from determined.master.registry import workspaces
from determined.master.scheduling import bindings
from determined.master.api._deps import http_error, master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.experiments import ExperimentAnswer
from determined.master.api.schemas.workspaces import (Completed, MoveExperimentBody, ProjectAnswer, ProjectBody,
                                                     ProjectNoteBody, ProjectNotes, ProjectNotesBody, WorkspaceAnswer,
                                                     WorkspaceBody, WorkspacePools)
from determined.master.views.workspace_reads import project_json, workspace_json
from determined.master.lifecycle.experiment import get_experiment
from determined.master.problems import RequestProblem

router = APIRouter()


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


def _taken(what: str) -> HTTPException:
    """A unique name taken between the check and the insert (another process): 409."""
    return http_error(RequestProblem(409, f"{what} was taken by another request at the same time; choose another name"))


# ---------------------------------------------------------------- workspaces


@router.post("/workspaces", response_model=WorkspaceAnswer)
def create_workspace(request: Request, body: Optional[WorkspaceBody] = None) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            ws = workspaces.create_workspace(s, _fields(body), auth.principal_of(request))
            return {"workspace": workspace_json(s, ws)}
    except IntegrityError:
        raise _taken("the workspace name") from None


@router.patch("/workspaces/{workspace_id}", response_model=WorkspaceAnswer)
def patch_workspace(request: Request, workspace_id: int, body: Optional[WorkspaceBody] = None) -> Dict[str, Any]:
    """Rename (`{"name"}`): the owner or an admin; default pools (`{"default_compute_pool", "default_aux_pool"}`):
    an admin."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            ws = workspaces.update_workspace(s, workspace_id, _fields(body), auth.principal_of(request))
            return {"workspace": workspace_json(s, ws)}
    except IntegrityError:
        raise _taken("the workspace name") from None


@router.get("/workspaces/{workspace_id}/available-resource-pools", response_model=WorkspacePools)
def available_resource_pools(request: Request, workspace_id: int) -> Dict[str, Any]:
    """The pools the workspace's jobs may use (`det workspace list-pools`): the unbound ones and those bound to it,
    with the pools its jobs get when their config names none."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        with master.read() as s:
            ws = workspaces.get_workspace(s, workspace_id)
            compute, aux = bindings.effective_defaults(s, master.pools, ws.id)
            return {"workspace_id": ws.id, "workspace_name": ws.name,
                    "resource_pools": bindings.available_pools(s, master.pools, ws.id),
                    "bound_resource_pools": sorted(pool for pool, ids in bindings.bound_workspaces(s).items()
                                                   if ws.id in ids and pool in master.pools.pools),
                    "default_compute_pool": compute, "default_aux_pool": aux}


@router.delete("/workspaces/{workspace_id}", response_model=Completed)
def delete_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        workspaces.delete_workspace(s, workspace_id, auth.principal_of(request))
    return {"completed": True}


@router.post("/workspaces/{workspace_id}/archive", response_model=WorkspaceAnswer)
def archive_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    return _set_workspace_archived(request, workspace_id, True)


@router.post("/workspaces/{workspace_id}/unarchive", response_model=WorkspaceAnswer)
def unarchive_workspace(request: Request, workspace_id: int) -> Dict[str, Any]:
    return _set_workspace_archived(request, workspace_id, False)


def _set_workspace_archived(request: Request, workspace_id: int, archived: bool) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        ws = workspaces.set_workspace_archived(s, workspace_id, archived, auth.principal_of(request))
        return {"workspace": workspace_json(s, ws)}


@router.post("/workspaces/{workspace_id}/projects", response_model=ProjectAnswer)
def create_project(request: Request, workspace_id: int, body: Optional[ProjectBody] = None) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            project = workspaces.create_project(s, workspace_id, _fields(body), auth.principal_of(request))
            return {"project": project_json(s, project)}
    except IntegrityError:
        raise _taken("the project name") from None


# ---------------------------------------------------------------- projects


@router.patch("/projects/{project_id}", response_model=ProjectAnswer)
def patch_project(request: Request, project_id: int, body: Optional[ProjectBody] = None) -> Dict[str, Any]:
    """Rename and/or describe (`{"name", "description"}`): the owner or an admin."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            project = workspaces.update_project(s, project_id, _fields(body), auth.principal_of(request))
            return {"project": project_json(s, project)}
    except IntegrityError:
        raise _taken("the project name") from None


@router.put("/projects/{project_id}/notes", response_model=ProjectNotes)
def put_project_notes(request: Request, project_id: int, body: Optional[ProjectNotesBody] = None) -> Dict[str, Any]:
    """Replace the notes (`{"notes": [{"name", "contents"}...]}`): the owner or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_notes(s, project_id, _fields(body), auth.principal_of(request))
        return {"notes": list(project.notes or [])}


@router.post("/projects/{project_id}/notes", response_model=ProjectNotes)
def add_project_note(request: Request, project_id: int, body: Optional[ProjectNoteBody] = None) -> Dict[str, Any]:
    """Add one note (`{"name", "contents"}`): the owner or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_notes(s, project_id, _fields(body), auth.principal_of(request), append=True)
        return {"notes": list(project.notes or [])}


@router.delete("/projects/{project_id}", response_model=Completed)
def delete_project(request: Request, project_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        workspaces.delete_project(s, project_id, auth.principal_of(request))
    return {"completed": True}


@router.post("/projects/{project_id}/archive", response_model=ProjectAnswer)
def archive_project(request: Request, project_id: int) -> Dict[str, Any]:
    return _set_project_archived(request, project_id, True)


@router.post("/projects/{project_id}/unarchive", response_model=ProjectAnswer)
def unarchive_project(request: Request, project_id: int) -> Dict[str, Any]:
    return _set_project_archived(request, project_id, False)


def _set_project_archived(request: Request, project_id: int, archived: bool) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        project = workspaces.set_project_archived(s, project_id, archived, auth.principal_of(request))
        return {"project": project_json(s, project)}


# ---------------------------------------------------------------- experiments


@router.post("/experiments/{experiment_id}/move", response_model=ExperimentAnswer)
def move_experiment(request: Request, experiment_id: int, body: Optional[MoveExperimentBody] = None) -> Dict[str, Any]:
    """Move the experiment to another project (`{"project_id"}`, or `{"workspace", "project"}` names)."""
    with problems_as_http(), master_of(request).write() as s:
        exp = workspaces.move_experiment(s, get_experiment(s, experiment_id), _fields(body), auth.principal_of(request))
        return {"experiment": serialize.experiment(s, exp)}

