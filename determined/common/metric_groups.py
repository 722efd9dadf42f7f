"""Metric groups with a meaning of their own: the system metrics a trial's profiler reports (determined.core's
profiler writes them, the master leaves them out of a trial's searcher and summary metrics)."""

SYSTEM_GROUPS = ("cpu", "memory", "disk", "network", "gpu")
