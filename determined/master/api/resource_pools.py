"""GET /resource-pools (the pools, their slots and schedulers), GET /agents and GET /agents/{id}/slots (the
machines and slots the resource manager hands out: the local one is one agent, this machine), enabling and disabling
them (admins: POST /agents/{id}/enable|disable, /agents/{id}/slots/{slot_id}/enable|disable), and the workspace
bindings of a pool (/resource-pools/{name}/workspace-bindings: anyone lists them, admins change them)."""
import logging
from typing import Any, Dict, List, Optional, Tuple

from fastapi import APIRouter, Path, Request
from sqlalchemy import select

from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas.resource_pools import (AgentAnswer, AgentList, AgentToggleBody, PoolBindings,
                                                         ResourcePoolList, SlotAnswer, SlotList, SlotToggleBody,
                                                         WorkspaceBindingsBody)
from determined.master.db import Trial
from determined.master.master import Master
from determined.master.problems import RequestProblem
from determined.master.rm.base import describe_run
from determined.master.scheduling import experiment_jobs  # noqa: F401  (registers the experiments' jobs)
from determined.master.scheduling import agent_moves, bindings, jobs, pools
from determined.master.security import auth

router = APIRouter()
logger = logging.getLogger("determined.master")


def _slot_owners(master: Master) -> Dict[int, Tuple[str, int, int]]:
    """Local slot index -> (allocation id, trial id, experiment id) of the run holding it."""
    if master.rm is None:
        return {}
    runs = master.rm.running()
    with master.read() as s:
        trials = {a: (i, e) for a, i, e in s.execute(select(Trial.allocation_id, Trial.id, Trial.experiment_id)
                                                     .where(Trial.allocation_id.is_not(None)))}
    out: Dict[int, Tuple[str, int, int]] = {}
    for allocation_id, run in runs.items():
        trial = trials.get(allocation_id)
        for slot in describe_run(run)["slot_ids"]:
            if isinstance(slot, int) and trial is not None:
                out[slot] = (allocation_id, trial[0], trial[1])
    return out


def _pool_slot_ids(master: Master) -> Dict[str, List[int]]:
    total = master.rm.total_slots if master.rm is not None else 0
    gpus = list(getattr(getattr(master.rm, "slots", None), "gpus", []) or [])
    return master.pools.slot_ids(total, gpus) if master.pools.splits_slots else {
        name: list(range(total)) for name in master.pools.pools}


def _slot_type(master: Master) -> Optional[str]:
    if master.rm is None:
        return None
    return "cuda" if master.rm.slots.kind == "gpu" else "cpu"


@router.get("/resource-pools", response_model=ResourcePoolList)
def list_resource_pools(request: Request) -> Dict[str, Any]:
    """Every pool: its slots (total, used), whether it is the default compute/aux pool, its scheduler, and how
    many of its jobs are queued or scheduled."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        with master.read() as s:
            every = jobs.all_jobs(s)
        cluster = master.pools
        slot_ids = _pool_slot_ids(master)
        owners = _slot_owners(master)
        ray_usage = getattr(master.rm, "pool_usage", None)  # the Ray RM: each pool's slots on its nodes
        usage = ray_usage() if ray_usage is not None else {}
        out = []
        for name, pool in cluster.pools.items():
            mine = [j for j in every if j.resource_pool == name]
            ids = slot_ids.get(name, [])
            used = (sum(1 for i in ids if i in owners) if master.rm is not None
                    else sum(j.allocated_slots for j in mine))
            agents, available = 1, len(ids) if master.rm is not None else None
            if ray_usage is not None:
                mine_usage = usage.get(name) or usage.get("") or {"total": 0, "used": 0, "nodes": []}
                ids, agents = [], len(mine_usage["nodes"])
                available, used = int(mine_usage["total"]), int(mine_usage["used"])
            out.append({
                "name": name, "description": pool.description, "type": "RESOURCE_POOL_TYPE_STATIC",
                "num_agents": agents, "slots_available": available, "slots_used": used,
                "slot_type": _slot_type(master), "slot_ids": ids,
                "default_compute_pool": name == cluster.default_compute, "default_aux_pool": name == cluster.default_aux,
                "preemptible": pool.scheduler.preempts, "scheduler_type": pool.scheduler.wire_type,
                "scheduler_fitting_policy": f"FITTING_POLICY_{pool.scheduler.fitting_policy.upper()}",
                "preemption": pool.scheduler.preemption, "default_priority": pool.scheduler.default_priority,
                "stats": {"queued_count": sum(1 for j in mine if j.state == jobs.STATE_QUEUED),
                          "scheduled_count": sum(1 for j in mine if j.state == jobs.STATE_SCHEDULED)},
            })
    return {"resource_pools": out}


def _local_agent(master: Master) -> Any:
    """The local resource manager (one agent, this machine), or None for another one."""
    rm = master.rm
    return rm if rm is not None and hasattr(rm, "free_slot_ids") and hasattr(rm, "agent") else None


def _pools_of_slot(master: Master) -> Dict[int, str]:
    out: Dict[int, str] = {}
    for name, ids in _pool_slot_ids(master).items():
        for i in ids:
            out.setdefault(i, name)
    return out


def _slots(master: Master) -> List[Dict[str, Any]]:
    if master.rm is None:
        return []
    owners = _slot_owners(master)
    pool_of = _pools_of_slot(master)
    gpus = list(getattr(master.rm.slots, "gpus", []) or [])
    kind = _slot_type(master) or "cpu"
    local = _local_agent(master)
    out = []
    for i in range(master.rm.total_slots):
        owner = owners.get(i)
        enabled, draining = local.agent.slot_state(i) if local is not None else (True, False)
        out.append({"id": str(i), "device_id": gpus[i] if i < len(gpus) else str(i), "device_type": kind,
                    "enabled": enabled, "draining": draining, "resource_pool": pool_of.get(i, pools.DEFAULT_POOL),
                    "allocation_id": owner[0] if owner else None, "trial_id": owner[1] if owner else None,
                    "experiment_id": owner[2] if owner else None})
    return out


def _ray_agents(master: Master) -> List[Dict[str, Any]]:
    """Each Ray node as an agent (id: its node id)."""
    return [{"id": a["id"], "registered_time": None, "slots": a["slots"], "containers": a["containers"],
             "resource_pools": a["resource_pools"], "enabled": a["enabled"], "draining": a["draining"],
             "addresses": [a["ip"]]} for a in master.rm.agents()]  # type: ignore[union-attr]


def _ray_slots(master: Master, agent_id: str) -> List[Dict[str, Any]]:
    node = next(a for a in master.rm.agents() if a["id"] == agent_id)  # type: ignore[union-attr]
    with master.read() as s:
        held = [a for a in node["slot_owners"] if a]
        trials = {a: (i, e) for a, i, e in s.execute(select(Trial.allocation_id, Trial.id, Trial.experiment_id)
                                                     .where(Trial.allocation_id.in_(held)))} if held else {}
    kind = _slot_type(master) or "cpu"
    pool = node["resource_pools"][0] if node["resource_pools"] else pools.DEFAULT_POOL
    out = []
    for i, allocation_id in enumerate(node["slot_owners"]):
        trial = trials.get(allocation_id) if allocation_id else None
        out.append({"id": str(i), "device_id": str(i), "device_type": kind, "enabled": node["enabled"],
                    "draining": node["draining"], "resource_pool": pool, "allocation_id": allocation_id,
                    "trial_id": trial[0] if trial else None, "experiment_id": trial[1] if trial else None})
    return out


def _agents(master: Master) -> List[Dict[str, Any]]:
    if master.rm is None:
        return []
    if hasattr(master.rm, "agents"):
        return _ray_agents(master)
    slots = _slots(master)
    local = _local_agent(master)
    return [{
        "id": local.agent_id if local is not None else "ray-cluster", "registered_time": None, "slots": len(slots),
        "containers": len(master.rm.running()), "resource_pools": sorted({s["resource_pool"] for s in slots}),
        "enabled": local.agent.enabled if local is not None else True,
        "draining": local.agent.draining if local is not None else False,
        "addresses": ["127.0.0.1"] if local is not None else [],
    }]


@router.get("/agents", response_model=AgentList)
def list_agents(request: Request) -> Dict[str, Any]:
    """The machines whose slots the resource manager hands out: the local resource manager is one agent (this
    machine); on a Ray cluster each alive node is an agent (its id: the Ray node id). None while no scheduler runs."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        return {"agents": _agents(master)}


def _unknown_agent(master: Master, agent_id: str) -> RequestProblem:
    known = ", ".join(a["id"] for a in _agents(master)) or "none (no scheduler runs)"
    hint = " (give a Ray node id, or its first 8 or more characters)" if hasattr(master.rm, "find_node") else ""
    return RequestProblem(404, f"agent {agent_id!r} not found{hint}; the agents are {known} (`det agent list`)")


@router.get("/agents/{agent_id}/slots", response_model=SlotList)
def list_slots(request: Request, agent_id: str = Path(max_length=256)) -> Dict[str, Any]:
    """The slots of an agent (`det slot list`): which run holds each, or none."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        if not any(a["id"] == agent_id for a in _agents(master)):
            raise _unknown_agent(master, agent_id)
        if hasattr(master.rm, "agents"):
            return {"slots": _ray_slots(master, agent_id)}
        return {"slots": _slots(master)}


def _toggle(request: Request, agent_id: str, body: AgentToggleBody, enable: bool) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http():
        auth.check_admin(auth.principal_of(request), "enable or disable an agent")
        if body.agent_id is not None and body.agent_id != agent_id:
            raise RequestProblem(400, f"agent_id {body.agent_id!r} is not the agent of the path ({agent_id!r}); "
                                      "leave it out or make them the same")
        if enable and body.drain:
            raise RequestProblem(400, "drain applies to disabling an agent only (`det agent disable --drain`)")
        rm, local = master.rm, _local_agent(master)
        if local is not None:
            if agent_id != local.agent_id:
                raise _unknown_agent(master, agent_id)
            return _toggle_local(master, local, body, enable)
        if rm is None or not hasattr(rm, "find_node"):
            raise RequestProblem(400, "this master has no agent to enable or disable: no scheduler runs here (start "
                                      "one with `det master up`)")
        node = rm.find_node(agent_id)  # type: ignore[attr-defined]
        if node is None:
            raise _unknown_agent(master, agent_id)
        if enable:
            problem = rm.enable_node(node)  # type: ignore[attr-defined]
            if problem:  # a node Ray itself drains
                raise RequestProblem(409, problem)
        else:
            moved = rm.disable_node(node, drain=body.drain)  # type: ignore[attr-defined]
            if moved and not body.drain:  # its trials checkpoint through the preemption signal and go elsewhere
                with master.write() as s:
                    agent_moves.preempt_runs(s, {a: f"its Ray node {node} was disabled (`det agent disable`)"
                                                 for a in moved})
        return {"agent": next(a for a in _ray_agents(master) if a["id"] == node)}


def _toggle_local(master: Master, local: Any, body: AgentToggleBody, enable: bool) -> Dict[str, Any]:
    """This machine, the local resource manager's one agent: disabled, no new run starts on it; without drain its
    trials checkpoint and wait in the queue until it is enabled again."""
    if enable:
        local.agent.enable()
        logger.info("agent %s enabled: new runs start on it again", local.agent_id)
    else:
        local.agent.disable(drain=body.drain)
        logger.info("agent %s disabled%s", local.agent_id, " (draining: its runs finish, nothing new starts)"
                    if body.drain else ": its trials checkpoint and wait until it is enabled")
        if not body.drain:
            with master.write() as s:
                agent_moves.preempt_runs(s, {a: f"its agent {local.agent_id} was disabled (`det agent disable`)"
                                             for a in local.running()})
    master.wake()
    return {"agent": _agents(master)[0]}


@router.post("/agents/{agent_id}/enable", response_model=AgentAnswer)
def enable_agent(request: Request, body: AgentToggleBody, agent_id: str = Path(max_length=256)) -> Dict[str, Any]:
    """Let new runs go to the agent again (`det agent enable`): admins only."""
    return _toggle(request, agent_id, body, True)


@router.post("/agents/{agent_id}/disable", response_model=AgentAnswer)
def disable_agent(request: Request, body: AgentToggleBody, agent_id: str = Path(max_length=256)) -> Dict[str, Any]:
    """No new run goes to the agent (`det agent disable`): admins only. Its running trials checkpoint and resume on
    other agents (the local machine: when it is enabled again), or with `drain` finish there."""
    return _toggle(request, agent_id, body, False)


def _toggle_slot(request: Request, agent_id: str, slot_id: int, body: SlotToggleBody, enable: bool) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http():
        auth.check_admin(auth.principal_of(request), "enable or disable a slot")
        if body.agent_id is not None and body.agent_id != agent_id:
            raise RequestProblem(400, f"agent_id {body.agent_id!r} is not the agent of the path ({agent_id!r}); "
                                      "leave it out or make them the same")
        if body.slot_id is not None and body.slot_id != slot_id:
            raise RequestProblem(400, f"slot_id {body.slot_id} is not the slot of the path ({slot_id}); leave it out "
                                      "or make them the same")
        if enable and body.drain:
            raise RequestProblem(400, "drain applies to disabling a slot only")
        local = _local_agent(master)
        if local is None:
            if hasattr(master.rm, "find_node") and master.rm.find_node(agent_id) is not None:  # type: ignore
                raise RequestProblem(400, "a Ray node's slots cannot be disabled one by one (Ray places runs by the "
                                          f"node's resources): disable the node (`det agent disable {agent_id}`)")
            raise _unknown_agent(master, agent_id)
        if agent_id != local.agent_id:
            raise _unknown_agent(master, agent_id)
        if not 0 <= slot_id < local.total_slots:
            raise RequestProblem(404, f"agent {agent_id!r} has no slot {slot_id}; its slots are 0 to "
                                      f"{local.total_slots - 1} (`det slot list`)")
        if enable:
            local.agent.enable_slot(slot_id)
        else:  # as Determined's: the run holding it goes on; no new run gets it
            local.agent.disable_slot(slot_id, drain=body.drain)
        logger.info("agent %s: slot %s %s", agent_id, slot_id, "enabled" if enable else "disabled")
        master.wake()
        return {"slot": _slots(master)[slot_id]}


@router.post("/agents/{agent_id}/slots/{slot_id}/enable", response_model=SlotAnswer)
def enable_slot(request: Request, body: SlotToggleBody, agent_id: str = Path(max_length=256),
                slot_id: int = Path(ge=0, le=1_000_000)) -> Dict[str, Any]:
    """A new run may get the slot again (`det slot enable`): admins only."""
    return _toggle_slot(request, agent_id, slot_id, body, True)


@router.post("/agents/{agent_id}/slots/{slot_id}/disable", response_model=SlotAnswer)
def disable_slot(request: Request, body: SlotToggleBody, agent_id: str = Path(max_length=256),
                 slot_id: int = Path(ge=0, le=1_000_000)) -> Dict[str, Any]:
    """No new run gets the slot (`det slot disable`); the run holding it goes on: admins only."""
    return _toggle_slot(request, agent_id, slot_id, body, False)


# ---------------------------------------------------------------- workspace bindings (Determined 0.23.4+)

_POOL = Path(max_length=256, description="the resource pool's name")


def _bindings_of(s: Any, pool: str) -> Dict[str, Any]:
    bound = bindings.workspaces_of_pool(s, pool)
    return {"resource_pool_name": pool, "workspace_ids": [i for i, _ in bound],
            "workspaces": [{"id": i, "name": n} for i, n in bound]}


@router.get("/resource-pools/{resource_pool_name}/workspace-bindings", response_model=PoolBindings)
def list_workspace_bindings(request: Request, resource_pool_name: str = _POOL) -> Dict[str, Any]:
    """The workspaces the pool is bound to (`det rp bindings list-workspaces`); none: every workspace may use it."""
    master = master_of(request)
    with problems_as_http():
        auth.principal_of(request)
        with master.read() as s:
            if resource_pool_name not in master.pools.pools and not bindings.workspaces_of_pool(s, resource_pool_name):
                raise RequestProblem(404, f"resource pool {resource_pool_name!r} not found; the pools of this master "
                                          f"are {', '.join(master.pools.pools)} (`det resource-pool list`)")
            return _bindings_of(s, resource_pool_name)


def _change(request: Request, pool: str, body: WorkspaceBindingsBody, mode: str) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http():
        principal = auth.principal_of(request)
        if body.resource_pool_name is not None and body.resource_pool_name != pool:
            raise RequestProblem(400, f"resource_pool_name {body.resource_pool_name!r} is not the pool of the path "
                                      f"({pool!r}); leave it out or make them the same")
        with master.write() as s:
            bindings.change_bindings(s, master.pools, principal, pool, mode, body.workspace_ids, body.workspace_names)
            return _bindings_of(s, pool)


@router.post("/resource-pools/{resource_pool_name}/workspace-bindings", response_model=PoolBindings)
def bind_workspaces(request: Request, body: WorkspaceBindingsBody, resource_pool_name: str = _POOL) -> Dict[str, Any]:
    """Bind the pool to these workspaces as well (`det rp bindings add`): admins only; not the default pools."""
    return _change(request, resource_pool_name, body, bindings.ADD)


@router.delete("/resource-pools/{resource_pool_name}/workspace-bindings", response_model=PoolBindings)
def unbind_workspaces(request: Request, body: WorkspaceBindingsBody,
                      resource_pool_name: str = _POOL) -> Dict[str, Any]:
    """Unbind these workspaces from the pool (`det rp bindings remove`): admins only. Their running jobs go on."""
    return _change(request, resource_pool_name, body, bindings.REMOVE)


@router.put("/resource-pools/{resource_pool_name}/workspace-bindings", response_model=PoolBindings)
def replace_workspace_bindings(request: Request, body: WorkspaceBindingsBody,
                               resource_pool_name: str = _POOL) -> Dict[str, Any]:
    """Make these the pool's only workspaces (`det rp bindings replace`; none: unbound): admins only."""
    return _change(request, resource_pool_name, body, bindings.REPLACE)
