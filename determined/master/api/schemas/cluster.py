"""GET /cluster/slots: the master's slots and the trial runs holding them."""
from typing import List, Optional, Union

from pydantic import Field

from determined.master.api.schemas._base import Wire


class SlotAllocation(Wire):
    """A trial run that holds slots (or, with no scheduler running, a trial the database says has a run)."""

    allocation_id: str
    trial_id: int
    experiment_id: int
    owner: str
    description: str
    trial_state: str = Field(description="its stored state (Determined's): ACTIVE until it ends, whether it runs or waits")
    trial_status: str = Field(description="what it does now (lifecycle/trial_status.py): RUNNING, WAITING (it keeps "
                                          "its slot while no trial needs it), STOPPING, ...")
    trial_status_reason: Optional[str] = Field(description="why, in words (e.g. `training to 800 batches`)")
    experiment_state: str
    slots: int = Field(description="the slots it holds (without a scheduler: the slots it asks for)")
    slot_ids: List[Union[int, str]] = Field(description="local slot indices, or Ray's IP/bundle of each rank")
    pid: Optional[int] = Field(description="null when the process is on another machine (a Ray node)")
    nodes: List[str] = Field(description="the IPs of the Ray nodes of its ranks; empty for the local manager")


class ClusterSlots(Wire):
    """GET /cluster/slots; `total` and `kind` are null when no scheduler runs (a master opened only to read)."""

    total: Optional[int]
    kind: Optional[str] = Field(description="gpu or cpu")
    used: int
    allocations: List[SlotAllocation]


__all__ = ["ClusterSlots", "SlotAllocation"]
