"""Workspaces and projects by name: the lookups that Workspace, Project and Experiment.move_to_project share.

The lowest module of the workspace classes: it imports no other client class, so that `_workspace` (which lists a
project's experiments) and `_experiment` (which moves one into a project) both build on it in one direction.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

from determined import errors
from determined.experimental.client._common import UsageError

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


def check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{what} must be a non-empty string, not {value!r}")
    return value


def check_id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive integer id, not {value!r}")
    return value


def workspace_by_name(session: Session, name: str) -> Dict[str, Any]:
    """The master's record of the workspace named `name` (a NotFoundError naming those that exist if none)."""
    found = session.get("/workspaces", {"name": name})["workspaces"]
    if not found:
        names = [w["name"] for w in session.get("/workspaces")["workspaces"]]
        raise errors.NotFoundError(404, f"workspace {name!r} not found; the workspaces are: "
                                        f"{', '.join(map(repr, names))}")
    return found[0]  # type: ignore[no-any-return]


def project_by_name(session: Session, workspace_id: int, project_name: str, workspace_label: Any) -> Dict[str, Any]:
    """The master's record of the project `project_name` of workspace `workspace_id` (a NotFoundError naming the
    workspace, as `workspace_label`, and its projects if none)."""
    check_name(project_name, "project_name")
    found = session.get(f"/workspaces/{workspace_id}/projects", {"name": project_name})["projects"]
    if not found:
        names = [p["name"] for p in session.get(f"/workspaces/{workspace_id}/projects")["projects"]]
        raise errors.NotFoundError(404, f"project {project_name!r} not found in workspace {workspace_label!r}; "
                                        f"its projects are: {', '.join(map(repr, names)) or 'none'}")
    return found[0]  # type: ignore[no-any-return]
