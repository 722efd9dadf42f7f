"""The master: REST API, database, experiment state machine, local resource manager, embedded runner.

It never imports a deep-learning framework; trials run in their own processes and only JSON crosses over.
"""
from determined.master.app import create_app
from determined.master.embedded import EmbeddedMaster, in_process_session, running_master_url, start
from determined.master.master import Master

__all__ = ["EmbeddedMaster", "Master", "create_app", "in_process_session", "running_master_url", "start"]
