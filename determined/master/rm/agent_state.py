"""What `det agent disable [--drain]`, `det agent enable` and `det slot disable|enable` set on the local resource
manager's one agent (this machine): Determined's agent and slot states.

A disabled agent takes no new run on any of its slots; `draining` only says how it was disabled (its runs finish
there rather than being preempted: the master does the preempting). A disabled slot takes no new run; the run holding
it goes on (Determined's `det slot disable`). Enabling the agent clears its disabled and draining states, not the
slots' own. The states live in the master's memory: a restarted master starts with the agent and every slot enabled,
as Determined's agents registered again after a master restart (only the experimental `agent_reattach_enabled` kept
more).
"""
import dataclasses
from typing import Dict, Tuple


@dataclasses.dataclass
class AgentState:
    enabled: bool = True
    draining: bool = False
    disabled_slots: Dict[int, bool] = dataclasses.field(default_factory=dict)  # slot index -> disabled with drain

    def disable(self, *, drain: bool) -> None:
        self.enabled, self.draining = False, bool(drain)

    def enable(self) -> None:
        self.enabled, self.draining = True, False

    def disable_slot(self, slot: int, *, drain: bool = False) -> None:
        self.disabled_slots[slot] = bool(drain)

    def enable_slot(self, slot: int) -> None:
        self.disabled_slots.pop(slot, None)

    def takes(self, slot: int) -> bool:
        """Whether a new run may get the slot."""
        return self.enabled and slot not in self.disabled_slots

    def slot_state(self, slot: int) -> Tuple[bool, bool]:
        """(enabled, draining) of the slot as `det slot list` shows it: the agent's state, then its own."""
        if not self.enabled:
            return False, self.draining
        if slot in self.disabled_slots:
            return False, self.disabled_slots[slot]
        return True, False
