"""The resource pools, agents and slots of a master (GET /resource-pools, /agents, /agents/{id}/slots): what
`det resource-pool list`, `det agent list` and `det slot list` work through. Determined 0.38's SDK had no class for
them (its CLI called the API bindings); these are that layer here."""
from __future__ import annotations

from typing import Any, Dict, List

from determined.experimental.client._common import Connection


class _Record:
    """An answer's object whose fields are attributes; `to_json()` gives the master's record back."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self._json = dict(data)
        for key, value in data.items():
            setattr(self, key, value)

    def to_json(self) -> Dict[str, Any]:
        return dict(self._json)


class ResourcePool(_Record):
    """A pool: `name`, `description`, `slots_available`, `slots_used`, `slot_type`, `default_compute_pool`,
    `default_aux_pool`, `scheduler_type`, `preemption`, `default_priority`, `stats`."""

    name: str
    scheduler_type: str
    default_compute_pool: bool

    def __repr__(self) -> str:
        return f"ResourcePool(name={self.name!r})"


class Agent(_Record):
    """A machine whose slots the resource manager hands out: `id`, `slots`, `containers`, `resource_pools`."""

    id: str

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r})"


class Slot(_Record):
    """A slot of an agent: `id`, `device_id`, `device_type`, `resource_pool`, `enabled`, `draining`,
    `allocation_id` (None: free)."""


class ResourcePools:
    """The pools, agents and slots on a connection (a `Connection`, or a session)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection if isinstance(connection, Connection) else Connection(session=connection)

    @property
    def _session(self) -> Any:
        return self._connection.session

    def list_resource_pools(self) -> List[ResourcePool]:
        return [ResourcePool(p) for p in self._session.get("/resource-pools")["resource_pools"]]

    def list_agents(self) -> List[Agent]:
        return [Agent(a) for a in self._session.get("/agents")["agents"]]

    def list_slots(self, agent_id: str) -> List[Slot]:
        return [Slot(s) for s in self._session.get(f"/agents/{agent_id}/slots")["slots"]]

    def enable_agent(self, agent_id: str) -> Agent:
        """New runs may go to the agent again (admins only)."""
        return Agent(self._session.post(f"/agents/{agent_id}/enable", {})["agent"])

    def disable_agent(self, agent_id: str, drain: bool = False) -> Agent:
        """No new run goes to the agent (admins only): its trials checkpoint and resume on other agents, or with
        `drain` finish there."""
        return Agent(self._session.post(f"/agents/{agent_id}/disable", {"drain": drain})["agent"])

    def enable_slot(self, agent_id: str, slot_id: int) -> Slot:
        """A new run may get the slot again (admins only)."""
        return Slot(self._session.post(f"/agents/{agent_id}/slots/{int(slot_id)}/enable", {})["slot"])

    def disable_slot(self, agent_id: str, slot_id: int) -> Slot:
        """No new run gets the slot; the run holding it goes on (admins only)."""
        return Slot(self._session.post(f"/agents/{agent_id}/slots/{int(slot_id)}/disable", {})["slot"])
