"""Workspace and Project (Determined 0.38's SDK), and the `Determined` methods that find and create them.

A workspace groups projects (and models); a project groups experiments. The default workspace and project are
both "Uncategorized" (id 1). The master's rules (determined/master/registry/workspaces.py): names unique, only the owner or
an admin changes, archives or deletes; an archived workspace or project takes no new experiments; a workspace or
project that still holds experiments is not deleted.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from determined.experimental.client._common import UsageError
from determined.experimental.client._experiment import ExperimentReference
from determined.experimental.client._names import check_id as _check_id
from determined.experimental.client._names import check_name as _check_name
from determined.experimental.client._names import project_by_name, workspace_by_name

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


def workspace_id_of(session: Session, name: Any, what: str = "workspace_name") -> int:
    """The id of the workspace named `name` (a NotFoundError naming those that exist if none)."""
    return int(workspace_by_name(session, _check_name(name, what))["id"])


class Project:
    """A project of a workspace: a group of experiments.

    Attributes: `id`; cached from the master (`reload()` refreshes them): `name`, `description`, `archived`,
    `workspace_id`, `username` (its owner), `notes`, `n_experiments`, `n_active_experiments`, `immutable` (the
    default project).
    """

    def __init__(self, session: Session, project_id: int) -> None:
        self._session = session
        self.id = _check_id(project_id, "project_id")
        self.name: Optional[str] = None
        self.description: Optional[str] = None
        self.archived: Optional[bool] = None
        self.workspace_id: Optional[int] = None
        self.username: Optional[str] = None
        self.notes: Optional[List[Dict[str, str]]] = None
        self.n_experiments: Optional[int] = None
        self.n_active_experiments: Optional[int] = None
        self.immutable: Optional[bool] = None

    def __repr__(self) -> str:
        return f"Project(id={self.id}, name={self.name!r}, workspace_id={self.workspace_id})"

    @classmethod
    def _from_json(cls, data: Dict[str, Any], session: Session) -> "Project":
        return cls(session, data["id"])._hydrate(data)

    def _hydrate(self, data: Dict[str, Any]) -> "Project":
        self.name = data["name"]
        self.description = data.get("description", "")
        self.archived = bool(data.get("archived"))
        self.workspace_id = data.get("workspace_id")
        self.username = data.get("username", "")
        self.notes = list(data.get("notes") or [])
        self.n_experiments = data.get("num_experiments")
        self.n_active_experiments = data.get("num_active_experiments")
        self.immutable = bool(data.get("immutable"))
        return self

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._session.get(f"/projects/{self.id}")["project"])

    def list_experiments(self) -> List[ExperimentReference]:
        """The experiments of this project, by id (each with the master's record of it: `to_json()`)."""
        rows = self._session.get(f"/projects/{self.id}/experiments")["experiments"]
        return [ExperimentReference(e["id"], _session=self._session)._update(e) for e in rows]

    def _patch(self, body: Dict[str, Any]) -> None:
        self._hydrate(self._session.patch(f"/projects/{self.id}", body)["project"])

    def set_name(self, name: str) -> None:
        """Rename the project (unique within its workspace)."""
        self._patch({"name": _check_name(name, "name")})

    def set_description(self, description: str) -> None:
        if not isinstance(description, str):
            raise UsageError(f"description must be a string, not {description!r}")
        self._patch({"description": description})

    def add_note(self, name: str, contents: str) -> None:
        """Add a note (a name and its text) to the project; `notes` becomes the master's list."""
        answer = self._session.post(f"/projects/{self.id}/notes", {"name": name, "contents": contents})
        self.notes = list(answer["notes"])

    def remove_note(self, name: str) -> None:
        """Remove the note named `name`; a ValueError when the project has none or several of that name."""
        notes = list(self._session.get(f"/projects/{self.id}")["project"]["notes"])
        found = [i for i, note in enumerate(notes) if note["name"] == name]
        if not found:
            raise ValueError(f"No note with name '{name}' found to remove.")
        if len(found) > 1:
            raise ValueError(f"Multiple notes with name '{name}' found; remove one with "
                             f"PUT /api/v1/projects/{self.id}/notes and the list to keep.")
        notes.pop(found[0])
        self.notes = list(self._session.request("PUT", f"/projects/{self.id}/notes", json={"notes": notes})["notes"])

    def get_workspace(self) -> "Workspace":
        """The workspace of this project, read now."""
        if self.workspace_id is None:
            self.reload()
        workspace = Workspace(self._session, workspace_id=self.workspace_id)
        workspace.reload()
        return workspace

    def archive(self) -> None:
        """Archive the project: it takes no new experiments until unarchived."""
        self._hydrate(self._session.post(f"/projects/{self.id}/archive")["project"])

    def unarchive(self) -> None:
        self._hydrate(self._session.post(f"/projects/{self.id}/unarchive")["project"])


class Workspace:
    """A workspace: a group of projects (and of models).

    Created with either `workspace_id` or `workspace_name` (looked up on the master). Attributes: `id`, `name`;
    cached from the master (`reload()` refreshes them): `archived`, `username` (its owner), `immutable` (the
    default workspace).
    """

    def __init__(self, session: Session, workspace_id: Optional[int] = None,
                 workspace_name: Optional[str] = None) -> None:
        if (workspace_id is None) == (workspace_name is None):
            raise ValueError("Workspace must be constructed with either a name or id (not both).")
        self._session = session
        self.archived: Optional[bool] = None
        self.username: Optional[str] = None
        self.immutable: Optional[bool] = None
        self.name: Optional[str] = workspace_name
        if workspace_id is None:
            data = workspace_by_name(session, _check_name(workspace_name, "workspace_name"))
            self.id: int = data["id"]
            self._hydrate(data)
        else:
            self.id = _check_id(workspace_id, "workspace_id")

    def __repr__(self) -> str:
        return f"Workspace(id={self.id}, name={self.name!r})"

    @classmethod
    def _from_json(cls, data: Dict[str, Any], session: Session) -> "Workspace":
        return cls(session, workspace_id=data["id"])._hydrate(data)

    def _hydrate(self, data: Dict[str, Any]) -> "Workspace":
        self.id = data["id"]
        self.name = data["name"]
        self.archived = bool(data.get("archived"))
        self.username = data.get("username", "")
        self.immutable = bool(data.get("immutable"))
        return self

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._session.get(f"/workspaces/{self.id}")["workspace"])

    def create_project(self, name: str, description: Optional[str] = None) -> Project:
        """A new project of this workspace (names are unique within a workspace)."""
        body = {"name": _check_name(name, "name"), "description": description or ""}
        return Project._from_json(self._session.post(f"/workspaces/{self.id}/projects", body)["project"],
                                  self._session)

    def get_project(self, project_name: str) -> Project:
        """The project of this workspace named `project_name` (a NotFoundError naming those it has if none)."""
        return Project._from_json(project_by_name(self._session, self.id, project_name, self.name or self.id),
                                  self._session)

    def list_projects(self) -> List[Project]:
        """The projects of this workspace, by id."""
        return [Project._from_json(p, self._session)
                for p in self._session.get(f"/workspaces/{self.id}/projects")["projects"]]

    def delete_project(self, name: str) -> None:
        """Delete the project `name` of this workspace (refused while it holds experiments)."""
        self._session.delete(f"/projects/{self.get_project(name).id}")

    def set_name(self, name: str) -> None:
        """Rename the workspace (names are unique)."""
        self._hydrate(self._session.patch(f"/workspaces/{self.id}", {"name": _check_name(name, "name")})["workspace"])

    def archive(self) -> None:
        """Archive the workspace: no new projects or experiments in it until unarchived."""
        self._hydrate(self._session.post(f"/workspaces/{self.id}/archive")["workspace"])

    def unarchive(self) -> None:
        self._hydrate(self._session.post(f"/workspaces/{self.id}/unarchive")["workspace"])


class WorkspaceMethods:
    """The workspace functions of `Determined` (a base class of it): `self._session` is its master's session."""

    _session: Any

    def create_workspace(self, name: str, *, default_compute_pool: Optional[str] = None,
                         default_aux_pool: Optional[str] = None) -> Workspace:
        """A new workspace owned by this client's user (names are unique); its default compute and aux pools
        (admins only) are used by its jobs that name no pool."""
        body = {"name": _check_name(name, "name")}
        body.update({k: v for k, v in (("default_compute_pool", default_compute_pool),
                                       ("default_aux_pool", default_aux_pool)) if v is not None})
        data = self._session.post("/workspaces", body)["workspace"]
        return Workspace._from_json(data, self._session)

    def get_workspace(self, name: str) -> Workspace:
        """The workspace named `name` (a NotFoundError naming those that exist if none)."""
        return Workspace(self._session, workspace_name=_check_name(name, "name"))

    def list_workspaces(self) -> List[Workspace]:
        """Every workspace, by id (the default "Uncategorized" first)."""
        return [Workspace._from_json(w, self._session) for w in self._session.get("/workspaces")["workspaces"]]

    def delete_workspace(self, name: str) -> None:
        """Delete the workspace `name` and its empty projects (refused while it holds experiments or models)."""
        self._session.delete(f"/workspaces/{self.get_workspace(name).id}")

    def get_project(self, project_id: int) -> Project:
        """The project with the given id."""
        data = self._session.get(f"/projects/{_check_id(project_id, 'project_id')}")["project"]
        return Project._from_json(data, self._session)
