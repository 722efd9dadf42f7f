"""Who may pass the master's proxy (/proxy/<task id>/...): one-time open codes and the proxy's own cookies.

A browser keeps the master's token in the UI's storage, which a request to /proxy/ does not carry. Opening a task
(`POST /api/v1/tasks/{id}/open`, `det notebook open`) returns `/proxy/<id>/?det_open=<code>`: a random code, valid
once for OPEN_CODE_TTL_S, for that task and that user. The proxy trades it for a cookie of its own, scoped to
`/proxy/<id>/` (HttpOnly, SameSite=Lax), bound to the user and the task: the master's token never becomes a cookie,
and a cookie of one task opens no other. API clients send `Authorization: Bearer <token>` instead. Every request
is checked again against the database (the user still active, still allowed, the task still running).
"""
import secrets
import threading
import time
from typing import Dict, Optional, Tuple

OPEN_CODE_TTL_S = 60.0
SESSION_TTL_S = 12 * 3600.0
MAX_ENTRIES = 10_000
COOKIE_PREFIX = "det_proxy_"


class ProxyAccess:
    def __init__(self) -> None:
        self._codes: Dict[str, Tuple[str, int, float]] = {}  # code -> (task id, user id, expiry)
        self._sessions: Dict[str, Tuple[str, int, float]] = {}  # cookie value -> (task id, user id, expiry)
        self._lock = threading.Lock()

    def _prune(self, table: Dict[str, Tuple[str, int, float]]) -> None:
        if len(table) >= MAX_ENTRIES:
            now = time.monotonic()
            for key in [k for k, v in table.items() if v[2] <= now]:
                del table[key]
            while len(table) >= MAX_ENTRIES:  # the oldest go first
                del table[next(iter(table))]

    def open_code(self, task_id: str, user_id: int) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._prune(self._codes)
            self._codes[code] = (task_id, user_id, time.monotonic() + OPEN_CODE_TTL_S)
        return code

    def redeem(self, code: str, task_id: str) -> Optional[Tuple[str, int]]:
        """A cookie value and the user id for a valid open code of `task_id` (the code is spent), or None."""
        with self._lock:
            entry = self._codes.pop(code, None)
            if entry is None or entry[0] != task_id or entry[2] <= time.monotonic():
                return None
            self._prune(self._sessions)
            value = secrets.token_urlsafe(32)
            self._sessions[value] = (task_id, entry[1], time.monotonic() + SESSION_TTL_S)
            return value, entry[1]

    def session_user(self, value: str, task_id: str) -> Optional[int]:
        entry = self._sessions.get(value)
        if entry is None or entry[0] != task_id or entry[2] <= time.monotonic():
            return None
        return entry[1]


def access_of(app: object) -> ProxyAccess:
    state = getattr(app, "state")
    access = getattr(state, "task_proxy_access", None)
    if access is None:
        access = ProxyAccess()
        state.task_proxy_access = access
    return access  # type: ignore[no-any-return]


def cookie_name(task_id: str) -> str:
    return COOKIE_PREFIX + task_id.replace("-", "")
