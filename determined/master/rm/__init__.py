"""Resource managers: where trial processes run (the local machine here)."""
from determined.master.rm.local import DEFAULT_TRIAL_COMMAND, LocalResourceManager
from determined.master.rm.slots import Slots, detect_slots

__all__ = ["DEFAULT_TRIAL_COMMAND", "LocalResourceManager", "Slots", "detect_slots"]
