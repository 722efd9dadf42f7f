"""Workspaces and projects: /workspaces, /projects, moving an experiment (views/workspace_reads.py)."""
from typing import Any, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire
from determined.master.api.schemas.checkpoints import Omitted


class Workspace(Wire):
    """A workspace with its numbers of projects, experiments and models."""

    id: int
    name: str
    archived: bool
    immutable: bool = Field(description="true for the default workspace (Uncategorized, 1)")
    username: str = Field(description="its owner")
    num_projects: int
    num_experiments: int
    num_models: int
    created_at: str


class ProjectNote(Wire):
    """A note of a project."""

    name: str
    contents: str


class Project(Wire):
    """A project with its workspace's name and its numbers of experiments."""

    id: int
    name: str
    description: str
    notes: List[ProjectNote]
    workspace_id: int
    workspace_name: str
    archived: bool
    immutable: bool = Field(description="true for the default project (Uncategorized, 1)")
    username: str = Field(description="its owner")
    num_experiments: int
    num_active_experiments: int = Field(description="its ACTIVE and PAUSED experiments")
    created_at: str


class WorkspaceAnswer(Wire):
    """One workspace: `{"workspace": {...}}`."""

    workspace: Workspace


class WorkspaceList(Wire):
    """Workspaces by id; `omitted` names rows that cannot be shown."""

    workspaces: List[Workspace]
    omitted: Optional[List[Omitted]] = None


class ProjectAnswer(Wire):
    """One project: `{"project": {...}}`."""

    project: Project


class ProjectList(Wire):
    """Projects by id; `omitted` names rows that cannot be shown."""

    projects: List[Project]
    omitted: Optional[List[Omitted]] = None


class ProjectNotes(Wire):
    """The notes of a project after a change."""

    notes: List[ProjectNote]


class Completed(Wire):
    """The deletion is done: `{"completed": true}`."""

    completed: bool


class WorkspaceBody(StrictWire):
    """POST /workspaces (a new workspace) and PATCH /workspaces/{id} (a rename, its default pools)."""

    name: Any = Field(None, description="the workspace's name (required for a new one)")
    default_compute_pool: Any = Field(None, description="the pool of its jobs with slots that name none (admins; "
                                                        "\"\" or null: the cluster's default)")
    default_aux_pool: Any = Field(None, description="the pool of its zero-slot jobs that name none (admins; \"\" or "
                                                    "null: the cluster's default)")


class WorkspacePools(Wire):
    """GET /workspaces/{id}/available-resource-pools: the pools the workspace's jobs may use."""

    workspace_id: int
    workspace_name: str
    resource_pools: List[str] = Field(description="the pools not bound to any workspace, and those bound to this one")
    bound_resource_pools: List[str] = Field(description="the pools bound to this workspace")
    default_compute_pool: str = Field(description="the pool of its jobs with slots that name none")
    default_aux_pool: str = Field(description="the pool of its zero-slot jobs that name none")


class ProjectBody(StrictWire):
    """POST /workspaces/{id}/projects (a new project) and PATCH /projects/{id}: absent fields stay."""

    name: Any = Field(None, description="the project's name (required for a new one)")
    description: Any = Field(None, description="a text (default '')")


class ProjectNotesBody(StrictWire):
    """PUT /projects/{id}/notes: the notes that replace the project's."""

    notes: Any = Field(None, description='a list of at most 100 {"name", "contents"} (required)')


class ProjectNoteBody(StrictWire):
    """POST /projects/{id}/notes: one note to add."""

    name: Any = Field(None, description="the note's name (required)")
    contents: Any = Field(None, description="its text (required)")


class MoveExperimentBody(StrictWire):
    """POST /experiments/{id}/move: the destination, by project id or by the names of workspace and project."""

    project_id: Any = Field(None, description="the destination project's id")
    workspace: Any = Field(None, description="the destination workspace's name (with project)")
    project: Any = Field(None, description="the destination project's name (with workspace)")
