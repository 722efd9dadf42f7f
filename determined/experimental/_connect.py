"""Which master a client command talks to, and over which transport (see ARCHITECTURE.md)."""
import os
from typing import Optional

from determined import common
from determined.common.api import Session


def configured_master(master: Optional[str] = None) -> Optional[str]:
    """An explicit master URL: the argument, then $DET_MASTER, then $DET_MASTER_ADDR."""
    return master or os.environ.get("DET_MASTER") or os.environ.get("DET_MASTER_ADDR") or None


def read_session(master: Optional[str] = None, user: Optional[str] = None) -> Session:
    """A session for commands that only read or record.

    An explicit master is used over HTTP; otherwise a master running on the local data dir (its lock file);
    otherwise the master's app is opened in-process on the data dir, with no background loops. The session
    authenticates by itself as `user` (default: $DET_USER, else the last `det user login`, else `determined`;
    see determined.common.api.Session).
    """
    url = configured_master(master)
    if url:
        return Session(url, user=user)
    from determined.master import embedded

    data_dir = common.data_dir()
    running = embedded.running_master_url(data_dir)
    if running:
        return Session(running, user=user)
    session = embedded.in_process_session(data_dir)
    session.user = user
    return session
