"""Which master a client command talks to, and over which transport (see ARCHITECTURE.md)."""
import os
from typing import Any, Optional

from determined import common


def configured_master(master: Optional[str] = None) -> Optional[str]:
    """An explicit master URL: the argument, then $DET_MASTER, then $DET_MASTER_ADDR."""
    return master or os.environ.get("DET_MASTER") or os.environ.get("DET_MASTER_ADDR") or None


def read_session(master: Optional[str] = None, user: Optional[str] = None) -> Any:
    """A session for commands that only read or record.

    An explicit master is used over HTTP; otherwise a master running on the local data dir (its lock file);
    otherwise, unless a user is asked for by name (`user`, $DET_USER), the data dir's database is read directly
    (determined.master.views.local_reads), and what is not a read goes to the master's app opened in-process, with no
    background loops. The session authenticates by itself as
    `user` (default: $DET_USER, else the last `det user login`, else `determined`; see
    determined.common.api.Session).
    """
    url = configured_master(master)
    if url:
        from determined.common.api import Session

        return Session(url, user=user)
    data_dir = common.data_dir()
    if (data_dir / "master.lock").exists():
        from determined.common.api import Session
        from determined.master import embedded

        running = embedded.running_master_url(data_dir)
        if running:
            return Session(running, user=user)
    if user is None and not os.environ.get("DET_USER"):  # a user asked for by name is authenticated by the app
        from determined.master.views import local_reads

        local = local_reads.open_local(data_dir)
        if local is not None:
            return local
    from determined.master import embedded

    session = embedded.in_process_session(data_dir)
    session.user = user
    return session


def record_session(master: Optional[str] = None, user: Optional[str] = None) -> Any:
    """A session for a client that records (an unmanaged run's reports): like `read_session`, but never the data
    dir's read-only database: with no master given or running, the data dir's API opened in-process."""
    url = configured_master(master)
    if url:
        from determined.common.api import Session

        return Session(url, user=user)
    from determined.master import embedded

    data_dir = common.data_dir()
    running = embedded.running_master_url(data_dir) if (data_dir / "master.lock").exists() else None
    if running:
        from determined.common.api import Session

        return Session(running, user=user)
    session = embedded.in_process_session(data_dir)
    session.user = user
    return session
