"""GET /resource-pools, GET /agents, GET /agents/{id}/slots: the pools, the machines and the slots (Determined
0.38's `resourcepoolv1.ResourcePool` and `agentv1.Agent`/`Slot`, with the master's snake_case names); enabling and
disabling an agent or a slot (POST /agents/{id}/enable|disable, /agents/{id}/slots/{slot_id}/enable|disable); the
workspace bindings of a pool (/resource-pools/{name}/workspace-bindings)."""
from typing import Annotated, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire


class PoolStats(Wire):
    queued_count: int = Field(description="jobs of the pool waiting with nothing running")
    scheduled_count: int = Field(description="jobs of the pool holding slots")


class ResourcePool(Wire):
    name: str
    description: str
    type: str = Field(description="RESOURCE_POOL_TYPE_STATIC: a fixed set of slots")
    num_agents: int = Field(description="the machines (agents) of the pool: 1 on the local resource manager")
    slots_available: Optional[int] = Field(description="its slots; null when no scheduler runs")
    slots_used: int
    slot_type: Optional[str] = Field(description="cuda or cpu; null when no scheduler runs")
    slot_ids: List[int] = Field(description="the local slot indices of the pool (every slot unless it has its own)")
    default_compute_pool: bool
    default_aux_pool: bool
    preemptible: bool = Field(description="whether its scheduler preempts running trials")
    scheduler_type: str = Field(description="SCHEDULER_TYPE_PRIORITY or SCHEDULER_TYPE_FAIR_SHARE")
    scheduler_fitting_policy: str
    preemption: bool = Field(description="the priority scheduler's `preemption` setting")
    default_priority: int
    stats: PoolStats


class ResourcePoolList(Wire):
    resource_pools: List[ResourcePool]


class Slot(Wire):
    id: str = Field(description="the slot's index on its agent")
    device_id: str = Field(description="the GPU id (CUDA_VISIBLE_DEVICES), or the CPU slot's index")
    device_type: str = Field(description="cuda or cpu")
    enabled: bool
    draining: bool
    resource_pool: str
    allocation_id: Optional[str] = Field(description="the run holding it; null: free")
    trial_id: Optional[int]
    experiment_id: Optional[int]


class Agent(Wire):
    id: str
    registered_time: Optional[str]
    slots: int
    containers: int = Field(description="the runs on it")
    resource_pools: List[str]
    enabled: bool
    draining: bool
    addresses: List[str]


class AgentList(Wire):
    agents: List[Agent]


class SlotList(Wire):
    slots: List[Slot]


class AgentToggleBody(StrictWire):
    """POST /agents/{agent_id}/enable and /disable (Determined's body: `agentId`, `drain`)."""

    agent_id: Optional[str] = Field(None, max_length=256, description="the agent; when given it must be the path's")
    drain: bool = Field(False, description="disable only: its runs finish there (else they checkpoint and move)")


class AgentAnswer(Wire):
    agent: Agent


class SlotToggleBody(StrictWire):
    """POST /agents/{agent_id}/slots/{slot_id}/enable and /disable (Determined's body: `agentId`, `slotId`,
    `drain`)."""

    agent_id: Optional[str] = Field(None, max_length=256, description="the agent; when given it must be the path's")
    slot_id: Optional[int] = Field(None, ge=0, le=1_000_000, description="the slot; when given it must be the path's")
    drain: bool = Field(False, description="disable only: shown as draining; the run holding it goes on either way")


class SlotAnswer(Wire):
    slot: Slot


class WorkspaceBindingsBody(StrictWire):
    """POST (add), DELETE (remove), PUT (replace) /resource-pools/{resource_pool_name}/workspace-bindings: the
    workspaces, by id and/or by name (Determined 0.23.4+'s body)."""

    resource_pool_name: Optional[str] = Field(None, max_length=256,
                                              description="the pool; when given it must be the path's")
    workspace_ids: Optional[List[int]] = Field(None, max_length=1000)
    workspace_names: Optional[List[Annotated[str, Field(max_length=256)]]] = Field(None, max_length=1000)


class BoundWorkspace(Wire):
    id: int
    name: str


class PoolBindings(Wire):
    """The workspaces a pool is bound to (none: every workspace may use it)."""

    resource_pool_name: str
    workspace_ids: List[int]
    workspaces: List[BoundWorkspace]


__all__ = ["Agent", "AgentAnswer", "AgentList", "AgentToggleBody", "BoundWorkspace", "PoolBindings", "PoolStats", "ResourcePool", "ResourcePoolList",
           "Slot", "SlotAnswer", "SlotList", "SlotToggleBody", "WorkspaceBindingsBody"]
