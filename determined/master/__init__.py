"""The master: REST API, database, experiment state machine, local resource manager, embedded runner.

It never imports a deep-learning framework; trials run in their own processes and only JSON crosses over.
Its names are imported on first use, so that a command that only reads a data dir (determined.master.views.local_reads)
does not pay for the server stack.
"""
from determined.common.lazy import lazy_attributes

_LAZY = {
    "create_app": "determined.master.app",
    "EmbeddedMaster": "determined.master.embedded",
    "in_process_session": "determined.master.embedded",
    "running_master_url": "determined.master.embedded",
    "start": "determined.master.embedded",
    "Master": "determined.master.master",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = ["EmbeddedMaster", "Master", "create_app", "in_process_session", "running_master_url", "start"]
