"""Resource managers: where trial processes run (this machine: local.py; a Ray cluster: ray.py, needs `ray`)."""
from determined.master.rm.base import LogSink, ResourceManager, ResourceManagerFactory
from determined.master.rm.local import DEFAULT_TRIAL_COMMAND, LocalResourceManager
from determined.master.rm.slots import Slots, detect_slots

__all__ = ["DEFAULT_TRIAL_COMMAND", "LocalResourceManager", "LogSink", "ResourceManager", "ResourceManagerFactory",
           "Slots", "detect_slots"]
