"""GET /master/info."""
from typing import Optional

from determined.master.api.schemas._base import Wire


class MasterInfo(Wire):
    """What a client learns about a master before it logs in."""

    version: str
    data_dir: str
    url: Optional[str] = None  # where trial processes reach it; None for an in-process app that serves no socket
    slots: Optional[int] = None  # None: the resource manager has no fixed count (Ray)
    scheduler: bool  # whether this master runs the scheduler (False: it only reads and records)
    trials_sandboxed: bool = False  # whether its trials run in a sandbox (rm/sandbox.py), which honours bind_mounts
