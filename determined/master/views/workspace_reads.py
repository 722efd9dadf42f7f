"""The read routes of workspaces and projects, in portable SQL over a `dbread.Reader`: the master serves them
through its SQLAlchemy session and the CLI reads a data dir no master runs on (local_reads.py) with the same code.
Writes and their rules are in determined/master/registry/workspaces.py.
"""
from typing import Any, Dict, List, Optional, Tuple

from determined.master.views import serialize
from determined.master.views.dbread import EXPERIMENT_COLUMNS, Reader, in_list, reader_of
from determined.master.problems import RequestProblem
from determined.master.views.reads import Listing

WORKSPACE_COLUMNS = "id, name, archived, immutable, owner, created_at"
PROJECT_COLUMNS = ("id, workspace_id, name, description, notes AS project_notes, archived, immutable, owner, "
                   "created_at")
ACTIVE_STATES = ("ACTIVE", "PAUSED")
_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def archived_param(value: Any) -> Optional[bool]:
    """`archived=true|false` of a query (None: not given); a 400 for anything else."""
    if value is None or value == "" or isinstance(value, bool):
        return value if isinstance(value, bool) else None
    found = _TRUE.get(str(value).lower())
    if found is None:
        raise RequestProblem(400, "invalid archived filter", [f"archived: {str(value)[:40]!r}; allowed: true, false"])
    return found


def _where(name: str, archived: Any, **equal: Any) -> Tuple[str, Dict[str, Any]]:
    """A WHERE clause (or "") and its parameters: columns equal to `equal`'s values, `name` if given, `archived`
    if given (true/false)."""
    params = {k: v for k, v in equal.items() if v is not None}
    if name:
        params["name"] = name
    wanted = archived_param(archived)
    if wanted is not None:
        params["archived"] = wanted
    clauses = [f"{column} = :{column}" for column in params]
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _experiment_counts(db: Reader, project_ids: List[int]) -> Dict[int, Dict[str, int]]:
    """`{project_id: {"all": n, "active": n}}`."""
    if not project_ids:
        return {}
    ids, params = in_list("p", project_ids)
    rows = db.rows(f"SELECT project_id, state, COUNT(*) AS n FROM experiments WHERE project_id IN {ids} "
                   f"GROUP BY project_id, state", **params)
    counts: Dict[int, Dict[str, int]] = {pid: {"all": 0, "active": 0} for pid in project_ids}
    for r in rows:
        counts[r.project_id]["all"] += int(r.n)
        if r.state in ACTIVE_STATES:
            counts[r.project_id]["active"] += int(r.n)
    return counts


def _time(value: Any) -> Optional[str]:
    return serialize.timestamp(value)


def workspace_json(db: Any, ws: Any) -> Dict[str, Any]:
    """A workspace (an ORM row or a Reader row) with its numbers of projects, experiments and models."""
    q = reader_of(db)
    project_ids = [r.id for r in q.rows("SELECT id FROM projects WHERE workspace_id = :w", w=ws.id)]
    counts = _experiment_counts(q, project_ids)
    n_models = q.scalar("SELECT COUNT(*) FROM models WHERE workspace_id = :w", w=ws.id) or 0
    return {
        "id": ws.id,
        "name": ws.name,
        "archived": bool(ws.archived),
        "immutable": bool(ws.immutable),
        "username": ws.owner,
        "num_projects": len(project_ids),
        "num_experiments": sum(c["all"] for c in counts.values()),
        "num_models": int(n_models),
        "created_at": _time(ws.created_at),
    }


def project_json(db: Any, project: Any) -> Dict[str, Any]:
    """A project (an ORM row or a Reader row) with its workspace's name and its numbers of experiments."""
    q = reader_of(db)
    ws = q.first("SELECT name FROM workspaces WHERE id = :w", w=project.workspace_id)
    counts = _experiment_counts(q, [project.id])[project.id]
    notes = project.project_notes if hasattr(project, "project_notes") else project.notes
    return {
        "id": project.id,
        "name": project.name,
        "description": project.description or "",
        "notes": list(notes or []),
        "workspace_id": project.workspace_id,
        "workspace_name": ws.name if ws is not None else "",
        "archived": bool(project.archived),
        "immutable": bool(project.immutable),
        "username": project.owner,
        "num_experiments": counts["all"],
        "num_active_experiments": counts["active"],
        "created_at": _time(project.created_at),
    }


def workspace_row(db: Reader, workspace_id: int) -> Any:
    row = db.first(f"SELECT {WORKSPACE_COLUMNS} FROM workspaces WHERE id = :w", w=workspace_id)
    if row is None:
        raise RequestProblem(404, f"workspace {workspace_id} not found; `det workspace list` shows the workspaces")
    return row


def project_row(db: Reader, project_id: int) -> Any:
    row = db.first(f"SELECT {PROJECT_COLUMNS} FROM projects WHERE id = :p", p=project_id)
    if row is None:
        raise RequestProblem(404, f"project {project_id} not found; `det project list WORKSPACE` shows the projects")
    return row


def workspaces(db: Reader, name: str = "", archived: Any = None) -> Listing:
    """`GET /workspaces`: by id; `name` keeps the one of that name, `archived` those (not) archived."""
    where, params = _where(name, archived)
    rows = db.rows(f"SELECT {WORKSPACE_COLUMNS} FROM workspaces{where} ORDER BY id", **params)
    return Listing("workspaces", rows, lambda w: workspace_json(db, w), lambda w: w.id)


def workspace(db: Reader, workspace_id: int) -> Dict[str, Any]:
    return {"workspace": workspace_json(db, workspace_row(db, workspace_id))}


def projects(db: Reader, workspace_id: Optional[int] = None, name: str = "", archived: Any = None) -> Listing:
    """`GET /projects` (every workspace's) and `GET /workspaces/{id}/projects`: by id."""
    if workspace_id is not None:
        workspace_row(db, workspace_id)
    where, params = _where(name, archived, workspace_id=workspace_id)
    rows = db.rows(f"SELECT {PROJECT_COLUMNS} FROM projects{where} ORDER BY id", **params)
    return Listing("projects", rows, lambda p: project_json(db, p), lambda p: p.id)


def project(db: Reader, project_id: int) -> Dict[str, Any]:
    return {"project": project_json(db, project_row(db, project_id))}


def project_experiments(db: Reader, project_id: int) -> Listing:
    """`GET /projects/{id}/experiments`: as `GET /experiments` shows them, by id."""
    project_row(db, project_id)
    rows = db.rows(f"SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE project_id = :p ORDER BY id", p=project_id)
    counts = serialize.trial_counts(db, [e.id for e in rows]) if rows else {}
    return Listing("experiments", rows, lambda e: serialize.experiment(db, e, counts.get(e.id, 0)), lambda e: e.id)
