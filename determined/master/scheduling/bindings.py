"""Workspace <-> resource pool bindings and workspace default pools (Determined 0.23.4+).

By default every pool is unbound and usable from every workspace. A pool bound to workspaces is usable only from
them (many-to-many); the cluster's default compute and aux pools cannot be bound. A workspace may name its own
default compute and aux pools, used when a config names no pool; each must be available to it. Only an admin binds
pools or sets a workspace's default pools; anyone logged in may list them.

    det rp bindings add|remove|replace POOL WORKSPACE...    (POST|DELETE|PUT /resource-pools/{pool}/workspace-bindings)
    det rp bindings list-workspaces POOL                    (GET /resource-pools/{pool}/workspace-bindings)
    det workspace list-pools WORKSPACE                      (GET /workspaces/{id}/available-resource-pools)
    det workspace create|edit NAME --default-compute-pool P --default-aux-pool P

Where a pool is resolved (Determined's order): `resources.resource_pool`, else the workspace's default (the aux
pool for a job of zero slots, the compute pool otherwise), else the cluster's default; the pool must be available
to the workspace, or the submission is refused with an error that names the binding. Unbinding does not touch
running jobs; new ones from that workspace are refused. Bindings of a pool that left the master config are kept
(they apply again if it comes back) and ignored meanwhile.

Every function works inside the caller's transaction and raises RequestProblem before it changes anything.
"""
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from determined.master.db import Workspace
from determined.master.db.models import ResourcePoolBinding, WorkspaceDefaultPools
from determined.master.problems import RequestProblem
from determined.master.scheduling import pools
from determined.master.security import auth

MAX_WORKSPACES = 1000  # workspaces one binding request names
MAX_NAMES_SHOWN = 20  # workspaces an error lists
ADD, REMOVE, REPLACE = "add", "remove", "replace"


def _names(values: Sequence[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:MAX_NAMES_SHOWN])
    more = len(values) - MAX_NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


# ---------------------------------------------------------------- reads


def bound_workspaces(s: Session) -> Dict[str, List[int]]:
    """Pool name -> the ids of the workspaces it is bound to (pools without bindings are absent)."""
    out: Dict[str, List[int]] = {}
    for pool, workspace_id in s.execute(select(ResourcePoolBinding.pool_name, ResourcePoolBinding.workspace_id)):
        out.setdefault(pool, []).append(int(workspace_id))
    return {pool: sorted(ids) for pool, ids in out.items()}


def workspaces_of_pool(s: Session, pool: str) -> List[Tuple[int, str]]:
    """(id, name) of the workspaces `pool` is bound to, by id."""
    return [(int(i), str(n)) for i, n in s.execute(
        select(Workspace.id, Workspace.name).join(ResourcePoolBinding, ResourcePoolBinding.workspace_id == Workspace.id)
        .where(ResourcePoolBinding.pool_name == pool).order_by(Workspace.id))]


def is_available(cluster: pools.ClusterPools, bound: Mapping[str, Sequence[int]], pool: str,
                 workspace_id: Optional[int]) -> bool:
    """Whether `pool` exists and is unbound or bound to the workspace (the cluster's default pools always are: a
    binding made before the master config made the pool a default is ignored)."""
    if pool not in cluster.pools:
        return False
    if pool in (cluster.default_compute, cluster.default_aux):
        return True
    ids = bound.get(pool)
    return not ids or workspace_id in ids


def available_pools(s: Session, cluster: pools.ClusterPools, workspace_id: int) -> List[str]:
    """The pools the workspace may use: the unbound ones and those bound to it, in the master config's order."""
    bound = bound_workspaces(s)
    return [name for name in cluster.pools if is_available(cluster, bound, name, workspace_id)]


def defaults_of(s: Session, workspace_id: int) -> Tuple[Optional[str], Optional[str]]:
    """The workspace's own (compute, aux) default pools; None where it uses the cluster's."""
    row = s.get(WorkspaceDefaultPools, workspace_id)
    return (row.compute_pool, row.aux_pool) if row is not None else (None, None)


def effective_defaults(s: Session, cluster: pools.ClusterPools, workspace_id: int) -> Tuple[str, str]:
    """The (compute, aux) pools a config that names none gets in the workspace."""
    compute, aux = defaults_of(s, workspace_id)
    return compute or cluster.default_compute, aux or cluster.default_aux


def _workspace_name(s: Session, workspace_id: Optional[int]) -> Optional[str]:
    return s.scalar(select(Workspace.name).where(Workspace.id == workspace_id)) if workspace_id is not None else None


def unavailable_problem(s: Session, cluster: pools.ClusterPools, pool: str, workspace_id: Optional[int],
                        field: str = "resources.resource_pool") -> Optional[str]:
    """Why a job of the workspace may not use `pool` (None: it may): the pool does not exist, or it is bound to
    other workspaces (the message names the binding and the fixes)."""
    problem = cluster.check_pool(pool)
    if problem:
        return problem.replace("resources.resource_pool", field)
    bound = bound_workspaces(s)
    if is_available(cluster, bound, pool, workspace_id):
        return None
    bound_names = [name for _, name in workspaces_of_pool(s, pool)]
    name = _workspace_name(s, workspace_id)
    workspace, arg = (repr(name), name) if name is not None else (f"id {workspace_id}", "WORKSPACE")
    usable = [p for p in cluster.pools if is_available(cluster, bound, p, workspace_id)]
    return (f"{field}: resource pool {pool!r} is bound to workspace(s) {_names(bound_names)} (`det rp bindings "
            f"list-workspaces {pool}`), so workspace {workspace} may not use it; use a pool available to workspace "
            f"{workspace} ({', '.join(usable) or 'none'}; `det workspace list-pools {arg}`), or ask an admin to bind "
            f"it (`det rp bindings add {pool} {arg}`)")


# ---------------------------------------------------------------- submissions


def resolve_pool(s: Session, cluster: pools.ClusterPools, workspace_id: Optional[int], requested: str,
                 slots: int) -> str:
    """The pool of a new job of the workspace: `requested`, else the workspace's default (aux for zero slots,
    compute otherwise), else the cluster's. Raises RequestProblem(400) when that pool is not available to it."""
    pool = requested
    if not pool:
        compute, aux = (effective_defaults(s, cluster, workspace_id) if workspace_id is not None
                        else (cluster.default_compute, cluster.default_aux))
        pool = aux if slots == 0 else compute
    problem = unavailable_problem(s, cluster, pool, workspace_id)
    if problem:
        raise RequestProblem(400, "invalid experiment config", [problem])
    return pool


def place_experiment(s: Session, cluster: pools.ClusterPools, config: Dict[str, Any],
                     workspace_id: Optional[int]) -> Dict[str, Any]:
    """The config of a new experiment of the workspace, checked against the pools' bindings: a config that names no
    pool gets the workspace's default pool written into `resources.resource_pool` (where the workspace has one)."""
    resources = config.get("resources") if isinstance(config.get("resources"), Mapping) else {}
    requested = str(resources.get("resource_pool") or "")
    slots = resources.get("slots_per_trial", 1)
    slots = slots if isinstance(slots, int) and not isinstance(slots, bool) else 1
    pool = resolve_pool(s, cluster, workspace_id, requested, slots)
    if requested or workspace_id is None or defaults_of(s, workspace_id) == (None, None):
        return config  # the scheduler's own default (pools.ClusterPools.pool_for) is this pool
    return {**config, "resources": {**resources, "resource_pool": pool}}


# ---------------------------------------------------------------- changes (admins)


def _workspace_ids(s: Session, ids: Optional[Sequence[int]], names: Optional[Sequence[str]]) -> List[int]:
    """The ids of the workspaces a request names by id and/or by name; a 404 naming those that do not exist."""
    ids, names = list(ids or []), list(names or [])
    if len(ids) + len(names) > MAX_WORKSPACES:
        raise RequestProblem(400, f"a binding request names at most {MAX_WORKSPACES} workspaces; split it")
    out: List[int] = []
    if ids:
        found = set(s.scalars(select(Workspace.id).where(Workspace.id.in_(ids))))
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise RequestProblem(404, f"workspace id(s) {', '.join(missing[:MAX_NAMES_SHOWN])} not found; "
                                      "`det workspace list` shows the workspaces")
        out += ids
    if names:
        by_name = {n: i for i, n in s.execute(select(Workspace.id, Workspace.name).where(Workspace.name.in_(names)))}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise RequestProblem(404, f"workspace(s) {_names([n[:80] for n in missing])} not found; "
                                      "`det workspace list` shows the workspaces")
        out += [by_name[n] for n in names]
    return list(dict.fromkeys(out))


def _check_bindable(cluster: pools.ClusterPools, pool: str, mode: str, known: bool) -> None:
    if pool not in cluster.pools and not (mode == REMOVE and known):
        raise RequestProblem(404, f"resource pool {pool[:80]!r} not found; the pools of this master are "
                                  f"{', '.join(cluster.pools)} (`det resource-pool list`)")
    if mode == REMOVE:
        return
    for kind, default, key in (("compute", cluster.default_compute, "default_compute_resource_pool"),
                               ("aux", cluster.default_aux, "default_aux_resource_pool")):
        if pool == default:
            raise RequestProblem(400, f"resource pool {pool!r} is the cluster's default {kind} pool, and the default "
                                      "pools cannot be bound to workspaces (Determined); bind another pool, or make "
                                      f"another pool the default (master config resource_manager.{key})")


def _defaults_problems(s: Session, cluster: pools.ClusterPools, bound: Mapping[str, Sequence[int]],
                       workspace_ids: Optional[Iterable[int]] = None) -> List[str]:
    """The workspace default pools that `bound` would make unavailable to their workspaces."""
    query = select(WorkspaceDefaultPools, Workspace.name).join(Workspace, Workspace.id == WorkspaceDefaultPools.workspace_id)
    if workspace_ids is not None:
        query = query.where(WorkspaceDefaultPools.workspace_id.in_(list(workspace_ids)))
    problems = []
    for row, name in s.execute(query):
        for kind, pool in (("compute", row.compute_pool), ("aux", row.aux_pool)):
            if pool and pool in cluster.pools and not is_available(cluster, bound, pool, row.workspace_id):
                problems.append(f"resource pool {pool!r} is the default {kind} pool of workspace {name!r}, which would "
                                f"no longer be able to use it; change that first (`det workspace edit {name} "
                                f"--default-{kind}-pool POOL`) or bind the pool to it too")
    return problems


def change_bindings(s: Session, cluster: pools.ClusterPools, principal: auth.Principal, pool: str, mode: str,
                    workspace_ids: Optional[Sequence[int]] = None,
                    workspace_names: Optional[Sequence[str]] = None) -> None:
    """Bind the pool to the workspaces (`add`), unbind them (`remove`), or make them its only ones (`replace`; none:
    the pool is unbound). Admins only. Refused, changing nothing, when a workspace's default pool would become
    unavailable to it."""
    auth.check_admin(principal, "bind resource pools to workspaces")
    before = bound_workspaces(s)
    _check_bindable(cluster, pool, mode, pool in before)
    ids = _workspace_ids(s, workspace_ids, workspace_names)
    if mode != REPLACE and not ids:
        raise RequestProblem(400, "name at least one workspace (workspace_names or workspace_ids)")
    current = set(before.get(pool, []))
    after = current | set(ids) if mode == ADD else current - set(ids) if mode == REMOVE else set(ids)
    bound = {**before, pool: sorted(after)}
    problems = _defaults_problems(s, cluster, bound)
    if problems:
        raise RequestProblem(400, f"cannot change the bindings of resource pool {pool!r}", problems)
    for workspace_id in current - after:
        s.execute(delete(ResourcePoolBinding).where(ResourcePoolBinding.pool_name == pool,
                                                    ResourcePoolBinding.workspace_id == workspace_id))
    for workspace_id in sorted(after - current):
        s.add(ResourcePoolBinding(pool_name=pool, workspace_id=workspace_id))
    s.flush()


def check_default_pools(fields: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    """The `default_compute_pool`/`default_aux_pool` of a workspace body: a pool name, or "" / null to use the
    cluster's default again. Only the fields the body has."""
    out: Dict[str, Optional[str]] = {}
    for key in ("default_compute_pool", "default_aux_pool"):
        if key not in fields:
            continue
        value = fields[key]
        if value is not None and not isinstance(value, str):
            raise RequestProblem(400, "invalid workspace", [f"{key}: expected a resource pool's name, or \"\" for the "
                                                            "cluster's default"])
        out[key] = value or None
    return out


def set_workspace_defaults(s: Session, cluster: pools.ClusterPools, principal: auth.Principal, workspace_id: int,
                           defaults: Mapping[str, Optional[str]]) -> None:
    """Set the workspace's default compute and/or aux pool (from `check_default_pools`; None: the cluster's).
    Admins only; each pool must be available to the workspace."""
    if not defaults:
        return
    auth.check_admin(principal, "set a workspace's default resource pools")
    problems = [problem for key, pool in defaults.items() if pool is not None
                for problem in [unavailable_problem(s, cluster, pool, workspace_id, key)] if problem]
    if problems:
        raise RequestProblem(400, "invalid workspace", problems)
    compute, aux = defaults_of(s, workspace_id)
    compute = defaults["default_compute_pool"] if "default_compute_pool" in defaults else compute
    aux = defaults["default_aux_pool"] if "default_aux_pool" in defaults else aux
    row = s.get(WorkspaceDefaultPools, workspace_id)
    if compute is None and aux is None:
        if row is not None:
            s.delete(row)
    elif row is None:
        s.add(WorkspaceDefaultPools(workspace_id=workspace_id, compute_pool=compute, aux_pool=aux))
    else:
        row.compute_pool, row.aux_pool = compute, aux
    s.flush()


def forget_workspace(s: Session, workspace_id: int) -> None:
    """Drop a deleted workspace's bindings and default pools."""
    s.execute(delete(ResourcePoolBinding).where(ResourcePoolBinding.workspace_id == workspace_id))
    s.execute(delete(WorkspaceDefaultPools).where(WorkspaceDefaultPools.workspace_id == workspace_id))
    s.flush()
