"""Workspaces and projects (Determined 0.18.3+): every experiment belongs to one project, every project and every
model to one workspace.

The default workspace and project, both "Uncategorized" with id 1 (migration 0008), are immutable: never renamed,
archived or deleted. Names are unique (workspaces globally, projects within their workspace) and follow
names.NAME_RULE. Anyone may create a workspace, or a project in a workspace that is not archived; only the owner
or an admin may rename, describe, archive, unarchive or delete it. An archived workspace or project takes no new
experiments (nor projects, nor moved experiments); a workspace or project that still holds experiments (or
models) is not deleted: move or delete them first. A workspace's default resource pools and the pools bound to it
are scheduling/bindings.py's: an admin sets them; an active experiment moves only to a workspace that may use its pool.

Every function works inside the caller's transaction and raises RequestProblem before it changes anything, so a
refused request stores nothing.
"""
from typing import Any, Dict, List, Mapping, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master.security import auth
from determined.master.registry import names
from determined.master.registry.fields import check_body
from determined.master.lifecycle import states
from determined.master.lifecycle.actions import config_value
from determined.master.scheduling import bindings, pools
from determined.master.db import Experiment, Model, Project, Workspace, utcnow
from determined.master.problems import RequestProblem
from determined.master.security.request_limits import clip_repr

DEFAULT_ID = 1
DEFAULT_NAME = "Uncategorized"
MAX_NAMES_SHOWN = 20  # how many existing names an error lists
ACTIVE_STATES = (states.ACTIVE, states.PAUSED)


# ---------------------------------------------------------------- lookups


def _names(values: List[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:MAX_NAMES_SHOWN])
    more = len(values) - MAX_NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "") if values else "none"


def get_workspace(s: Session, workspace_id: int) -> Workspace:
    ws = s.get(Workspace, workspace_id)
    if ws is None:
        raise RequestProblem(404, f"workspace {workspace_id} not found; `det workspace list` shows the workspaces")
    return ws


def workspace_by_name(s: Session, name: str) -> Workspace:
    """The workspace named `name`; a 404 that names the workspaces that exist."""
    ws = s.scalars(select(Workspace).where(Workspace.name == name)).first()
    if ws is None:
        existing = list(s.scalars(select(Workspace.name).order_by(Workspace.name)))
        raise RequestProblem(404, f"workspace {clip_repr(name, 80)} not found; the workspaces are: {_names(existing)}")
    return ws


def get_project(s: Session, project_id: int) -> Project:
    project = s.get(Project, project_id)
    if project is None:
        raise RequestProblem(404, f"project {project_id} not found; `det project list WORKSPACE` shows the projects")
    return project


def project_by_name(s: Session, ws: Workspace, name: str) -> Project:
    """The project `name` of workspace `ws`; a 404 that names the projects the workspace has."""
    project = s.scalars(select(Project).where(Project.workspace_id == ws.id, Project.name == name)).first()
    if project is None:
        existing = list(s.scalars(select(Project.name).where(Project.workspace_id == ws.id).order_by(Project.name)))
        raise RequestProblem(404, f"project {clip_repr(name, 80)} not found in workspace {ws.name!r}; its projects "
                                  f"are: {_names(existing)}")
    return project


# ---------------------------------------------------------------- validation and rights


def _check_workspace_name(value: Any) -> str:
    return names.check_name(value, "name", "workspace name")


def _check_project_name(value: Any) -> str:
    return names.check_name(value, "name", "project name")


def _check_owner(principal: auth.Principal, thing: Any, what: str, kind: str) -> None:
    label = f"{kind} {thing.name!r}"
    if thing.immutable:
        raise RequestProblem(403, f"the default {label} cannot be {what}; create a {kind} of your own with "
                                  f"`det {kind} create`")
    auth.check_owner(principal, thing.owner, label, "change", f"{kind}s")


def _check_not_trial(principal: auth.Principal, what: str) -> None:
    if principal.is_trial:
        raise RequestProblem(403, f"a trial's token cannot {what}")


def _check_workspace_open(ws: Workspace, what: str) -> None:
    if ws.archived:
        raise RequestProblem(400, f"workspace {ws.name!r} is archived: {what} is not possible; unarchive it first "
                                  f"(`det workspace unarchive {ws.name}`)")


def check_open_project(s: Session, project: Project, what: str = "adding experiments") -> Workspace:
    """The project's workspace, after checking that neither is archived (new experiments go only there)."""
    ws = get_workspace(s, project.workspace_id)
    _check_workspace_open(ws, what)
    if project.archived:
        raise RequestProblem(400, f"project {project.name!r} of workspace {ws.name!r} is archived: {what} is not "
                                  f"possible; unarchive it first (`det project unarchive {ws.name} {project.name}`)")
    return ws


def _taken_workspace(s: Session, name: str, but: Optional[int] = None) -> None:
    found = s.scalars(select(Workspace.id).where(Workspace.name == name)).first()
    if found is not None and found != but:
        raise RequestProblem(409, f"a workspace named {name!r} already exists; choose another name")


def _taken_project(s: Session, ws: Workspace, name: str, but: Optional[int] = None) -> None:
    found = s.scalars(select(Project.id).where(Project.workspace_id == ws.id, Project.name == name)).first()
    if found is not None and found != but:
        raise RequestProblem(409, f"workspace {ws.name!r} already has a project named {name!r}; choose another name")


# ---------------------------------------------------------------- workspaces


_WORKSPACE_FIELDS = ("name", "default_compute_pool", "default_aux_pool")


def create_workspace(s: Session, body: Any, principal: auth.Principal) -> Workspace:
    """A new workspace `{"name", "default_compute_pool"?, "default_aux_pool"?}` owned by the sender; 409 when the
    name is taken. Default pools: admins only (scheduling/bindings.py)."""
    _check_not_trial(principal, "create workspaces")
    fields = check_body(body, _WORKSPACE_FIELDS, "workspace")
    name = _check_workspace_name(fields.get("name"))
    defaults = bindings.check_default_pools(fields)
    if defaults:
        auth.check_admin(principal, "set a workspace's default resource pools")
    _taken_workspace(s, name)
    ws = Workspace(name=name, archived=False, immutable=False, owner=principal.username, owner_id=principal.user_id,
                   created_at=utcnow())
    s.add(ws)
    s.flush()
    bindings.set_workspace_defaults(s, pools.of_session(s), principal, ws.id, defaults)
    return ws


def update_workspace(s: Session, workspace_id: int, body: Any, principal: auth.Principal) -> Workspace:
    """Rename a workspace (`{"name"}`): its owner or an admin; set its default pools (`{"default_compute_pool",
    "default_aux_pool"}`, "" for the cluster's): an admin, also on the default workspace."""
    fields = check_body(body, _WORKSPACE_FIELDS, "workspace update")
    ws = get_workspace(s, workspace_id)
    defaults = bindings.check_default_pools(fields)
    if "name" in fields or not defaults:
        _check_owner(principal, ws, "renamed", "workspace")
    if "name" in fields:
        name = _check_workspace_name(fields["name"])
        _taken_workspace(s, name, but=ws.id)
        ws.name = name
    bindings.set_workspace_defaults(s, pools.of_session(s), principal, ws.id, defaults)
    s.flush()
    return ws


def set_workspace_archived(s: Session, workspace_id: int, archived: bool, principal: auth.Principal) -> Workspace:
    ws = get_workspace(s, workspace_id)
    _check_owner(principal, ws, "archived" if archived else "unarchived", "workspace")
    ws.archived = archived
    s.flush()
    return ws


def delete_workspace(s: Session, workspace_id: int, principal: auth.Principal) -> None:
    """Delete a workspace that holds no experiments and no models (its empty projects go with it)."""
    ws = get_workspace(s, workspace_id)
    _check_owner(principal, ws, "deleted", "workspace")
    project_ids = list(s.scalars(select(Project.id).where(Project.workspace_id == ws.id)))
    n_experiments = _count_experiments(s, project_ids)
    n_models = s.scalar(select(func.count()).select_from(Model).where(Model.workspace_id == ws.id)) or 0
    if n_experiments or n_models:
        held = " and ".join(x for x in (f"{n_experiments} experiment(s)" if n_experiments else "",
                                        f"{n_models} model(s)" if n_models else "") if x)
        raise RequestProblem(400, f"workspace {ws.name!r} is not empty: it holds {held}; move them to another "
                                  f"workspace (`det experiment move`, `det model move`) or delete them first")
    for project in s.scalars(select(Project).where(Project.workspace_id == ws.id)):
        s.delete(project)
    bindings.forget_workspace(s, ws.id)
    s.flush()
    s.delete(ws)
    s.flush()


def _count_experiments(s: Session, project_ids: List[int], active: bool = False) -> int:
    if not project_ids:
        return 0
    query = select(func.count()).select_from(Experiment).where(Experiment.project_id.in_(project_ids))
    if active:
        query = query.where(Experiment.state.in_(ACTIVE_STATES))
    return int(s.scalar(query) or 0)


# ---------------------------------------------------------------- projects


def create_project(s: Session, workspace_id: int, body: Any, principal: auth.Principal) -> Project:
    """A new project `{"name", "description"?}` in an unarchived workspace, owned by the sender; 409 when the
    workspace already has a project of that name."""
    _check_not_trial(principal, "create projects")
    fields = check_body(body, ("name", "description"), "project")
    ws = get_workspace(s, workspace_id)
    name = _check_project_name(fields.get("name"))
    description = names.check_description("" if fields.get("description") is None else fields["description"])
    _check_workspace_open(ws, "creating projects")
    _taken_project(s, ws, name)
    project = Project(workspace_id=ws.id, name=name, description=description, notes=[], archived=False,
                      immutable=False, owner=principal.username, owner_id=principal.user_id, created_at=utcnow())
    s.add(project)
    s.flush()
    return project


def update_project(s: Session, project_id: int, body: Any, principal: auth.Principal) -> Project:
    """Rename a project and/or replace its description (`{"name", "description"}`): its owner or an admin."""
    fields = check_body(body, ("name", "description"), "project update")
    project = get_project(s, project_id)
    _check_owner(principal, project, "changed", "project")
    ws = get_workspace(s, project.workspace_id)
    _check_workspace_open(ws, "changing its projects")
    name = _check_project_name(fields["name"]) if "name" in fields else None
    description = names.check_description(fields["description"]) if "description" in fields else None
    if name is not None:
        _taken_project(s, ws, name, but=project.id)
        project.name = name
    if description is not None:
        project.description = description
    s.flush()
    return project


def set_project_archived(s: Session, project_id: int, archived: bool, principal: auth.Principal) -> Project:
    project = get_project(s, project_id)
    _check_owner(principal, project, "archived" if archived else "unarchived", "project")
    _check_workspace_open(get_workspace(s, project.workspace_id), f"{'' if archived else 'un'}archiving its projects")
    project.archived = archived
    s.flush()
    return project


MAX_NOTES = 100


def _check_notes(value: Any) -> List[Dict[str, str]]:
    """Project notes: a list of at most MAX_NOTES `{"name", "contents"}` (a name as a label, contents as a
    description)."""
    if not isinstance(value, list):
        raise RequestProblem(400, "invalid project notes", ["notes: expected a list of {\"name\", \"contents\"}"])
    if len(value) > MAX_NOTES:
        raise RequestProblem(400, "invalid project notes", [f"notes: {len(value)} notes; at most {MAX_NOTES}"])
    problems, notes = [], []
    for i, note in enumerate(value):
        if not isinstance(note, Mapping) or set(note) != {"name", "contents"}:
            problems.append(f"notes[{i}]: expected an object with exactly the keys name and contents")
            continue
        problem = names.name_problem(note["name"], slashes=True)
        if problem:
            problems.append(f"notes[{i}].name: {problem}")
        problem = names.description_problem(note["contents"], f"notes[{i}].contents")
        if problem:
            problems.append(problem)
        notes.append({"name": note["name"], "contents": note["contents"]})
    if problems:
        raise RequestProblem(400, "invalid project notes", problems)
    return notes


def set_project_notes(s: Session, project_id: int, body: Any, principal: auth.Principal, *,
                      append: bool = False) -> Project:
    """Replace the project's notes (`{"notes": [...]}`), or with `append` add one (`{"name", "contents"}`): its
    owner or an admin."""
    project = get_project(s, project_id)
    if append:
        notes = list(project.notes or []) + _check_notes([check_body(body, ("name", "contents"), "note")])
    else:
        notes = _check_notes(check_body(body, ("notes",), "project notes").get("notes"))
    _check_owner(principal, project, "changed", "project")
    _check_workspace_open(get_workspace(s, project.workspace_id), "changing its projects")
    project.notes = _check_notes(notes)
    s.flush()
    return project


def delete_project(s: Session, project_id: int, principal: auth.Principal) -> None:
    """Delete a project that holds no experiments."""
    project = get_project(s, project_id)
    _check_owner(principal, project, "deleted", "project")
    n = _count_experiments(s, [project.id])
    if n:
        raise RequestProblem(400, f"project {project.name!r} is not empty: it holds {n} experiment(s); move them to "
                                  f"another project (`det experiment move`) or delete them first")
    s.delete(project)
    s.flush()


# ---------------------------------------------------------------- experiments


def project_for_new_experiment(s: Session, config: Mapping[str, Any], project_id: Any = None) -> Project:
    """The project a new experiment goes to: `project_id` of the request, else the config's `workspace` and
    `project` (names), else the default project; it and its workspace must not be archived."""
    if project_id is not None:
        if isinstance(project_id, bool) or not isinstance(project_id, int):
            raise RequestProblem(400, "invalid project_id", [f"project_id: expected a project's id (an integer), got "
                                                             f"{clip_repr(project_id, 60)}"])
        project = get_project(s, project_id)
    elif config.get("workspace") or config.get("project"):
        ws_name, project_name = config.get("workspace") or "", config.get("project") or ""
        if not (ws_name and project_name):  # the config check refuses this too; here for other callers
            raise RequestProblem(400, "invalid experiment config", [
                "workspace and project must both be given (the names of an existing workspace and project), or "
                "neither (the experiment goes to Uncategorized)"])
        project = project_by_name(s, workspace_by_name(s, ws_name), project_name)
    else:
        project = get_project(s, DEFAULT_ID)
    check_open_project(s, project)
    return project


def move_experiment(s: Session, exp: Experiment, body: Any, principal: auth.Principal) -> Experiment:
    """Move an experiment to another project (`{"project_id"}` or `{"workspace", "project"}` names): the
    experiment's owner or an admin; the destination must not be archived."""
    fields = check_body(body, ("project_id", "workspace", "project"), "experiment move")
    auth.check_experiment_owner(principal, exp, "move")
    if "project_id" in fields:
        project = project_for_new_experiment(s, {}, fields["project_id"])
    else:
        ws_name, project_name = fields.get("workspace"), fields.get("project")
        if not isinstance(ws_name, str) or not ws_name or not isinstance(project_name, str) or not project_name:
            raise RequestProblem(400, "invalid experiment move", [
                "project_id: required (the destination project's id), or both workspace and project (its names)"])
        project = project_for_new_experiment(s, {"workspace": ws_name, "project": project_name})
    if exp.state in ACTIVE_STATES:  # it will run again: its pool must be available to the new workspace
        cluster = pools.of_session(s)
        pool = str(config_value(exp.config, "resources", "resource_pool", default="") or "") or cluster.default_compute
        problem = pool in cluster.pools and bindings.unavailable_problem(s, cluster, pool, project.workspace_id)
        if problem:
            raise RequestProblem(400, "the experiment cannot move there", [problem])
    exp.project_id = project.id
    s.flush()
    return exp
