"""What every client object shares: the session to its master, argument errors, timestamps."""
from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any, Dict, Optional

from determined import errors
from determined.experimental import _connect

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


class UsageError(errors.DeterminedError, ValueError):
    """A call of the SDK with arguments that cannot work; the message says which and what to pass instead."""


def open_session(master: Optional[str], user: Optional[str] = None) -> Session:
    """A session to `master` (a URL), else $DET_MASTER / $DET_MASTER_ADDR, else the local data dir's master; as
    `user` when given."""
    return _connect.read_session(master or None, user)


class Connection:
    """The session of a Determined object, shared by every object it returns.

    Reads and records use `session` (a master's URL, the local data dir's database, or its API in-process). What
    makes work run (creating or activating an experiment) uses `for_work()`: with no master running on the data
    dir, this process becomes it (an embedded master in the background, stopped at `close()` or when the process
    exits; running trials checkpoint then, and their experiments resume when a master next runs on the data dir),
    and every object of this Determined talks to it from then on.
    """

    def __init__(self, master: Optional[str], user: Optional[str] = None, session: Optional[Session] = None) -> None:
        self.master = master or ""
        self.user = user
        self._session = session
        self._embedded: Any = None

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = open_session(self.master, self.user)
        return self._session

    def for_work(self) -> Session:
        if self.master or self._embedded is not None:
            return self.session
        from determined import common
        from determined.common.api import Session as HTTPSession
        from determined.master import embedded

        data_dir = common.data_dir()
        url = embedded.running_master_url(data_dir)
        if url:
            self._session = HTTPSession(url, user=self.user)
            return self._session
        import atexit

        try:
            self._embedded = embedded.start(data_dir)
        except embedded.MasterAlreadyRunning:
            url = embedded.running_master_url(data_dir)
            if not url:
                raise
            self._session = HTTPSession(url, user=self.user)
            return self._session
        atexit.register(self.close)
        self._session = HTTPSession(self._embedded.url, user=self.user)
        return self._session

    def close(self) -> None:
        """Stop the master this process started, if any (its running trials checkpoint first)."""
        master, self._embedded = self._embedded, None
        if master is not None:
            self._session = None
            master.stop()


class MasterBound:
    """Holds the master address given by the user and opens its session on first use."""

    def __init__(self, master: Optional[str], session: "Optional[Session | Connection]") -> None:
        self._master = master or ""
        if isinstance(session, Connection):
            self._connection = session
        else:
            self._connection = Connection(self._master, session=session)

    @property
    def _session(self) -> Session:
        return self._connection.session

    @property
    def _session_obj(self) -> Optional[Session]:
        return self._connection._session


def parse_time(value: Any) -> Optional[datetime.datetime]:
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value))


def json_object(value: Any, what: str) -> Dict[str, Any]:
    """`value` if it is a dict that JSON can encode; otherwise a UsageError naming `what`."""
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a dict (a JSON object), not {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{what} must be JSON-serializable: {e}") from None
    return value


def string_list(value: Any, what: str) -> list:
    if isinstance(value, str) or not isinstance(value, (list, tuple, set)) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{what} must be a list of strings (top-level metadata keys), e.g. ['key']")
    return list(value)
