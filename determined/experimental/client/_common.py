"""What every client object shares: the session to its master, argument errors, timestamps."""
from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any, Dict, Optional

from determined import errors
from determined.experimental._connect import Connection  # the one way to a master, shared by a Determined's objects

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session

__all__ = ["Connection", "MasterBound", "UsageError", "json_object", "parse_time", "string_list"]


class UsageError(errors.DeterminedError, ValueError):
    """A call of the SDK with arguments that cannot work; the message says which and what to pass instead."""


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
