"""What a request may send the master: body sizes per route, the nesting depth of JSON, and how much of the input
an error may quote back (docs/server.md, "Input limits").

`RequestLimitMiddleware` refuses a body larger than its route's limit with 413 before reading it (by its
Content-Length, or while counting a chunked body), and a JSON body nested deeper than MAX_JSON_DEPTH with 400
naming the field, before any route sees it. So nothing a route stores can be too deep to serialise again.
Paths outside /api/ (the web UI's pages and files) take no body: any body is refused unread. A request that no
token authenticated (a login, `/api/v1/master/info`; every other unauthenticated one was refused before) may send
at most UNAUTHENTICATED_BODY.
"""
import json
import math
import re
from typing import Any, Callable, Iterable, List, Optional, Tuple

from starlette.types import Message, Receive, Scope, Send

KiB = 1024
MiB = 1024 * KiB

MAX_JSON_DEPTH = 32
"""Objects and lists nested in one request body (a body `{"config": {...}}` is already 2 levels at `config`'s
fields); real configs, metadata and metrics nest fewer than 10."""

LOGIN_BODY = 16 * KiB
UNAUTHENTICATED_BODY = LOGIN_BODY
JSON_BODY = 1 * MiB
TRIAL_REPORT_BODY = 16 * MiB  # a checkpoint's report (its list of files), an import's batch of records
METRICS_REPORT_BODY = 1 * MiB
"""One metrics report of a trial (training, validation, a custom group): a report is stored as one row, read back
with every curve and table of the trial, and parsed while other users wait; 20 reports of 13 MB took another
user's p90 latency from 0.14 s to 3.65 s. Averaged metrics of even thousands of names fit many times over."""
MODEL_DEF_BYTES = 96 * MiB  # the model directory's .tar.gz (determined/master/lifecycle/model_def.py)
UPLOAD_BODY = 4 * math.ceil(MODEL_DEF_BYTES / 3) + JSON_BODY  # its base64, plus the config beside it

_METRICS_REPORT = re.compile(r"^/api/v1/trials/(\d+)/(training_metrics|validation_metrics|metrics)/?$")
# (method, path pattern, limit, what it is): the first match applies; every other request gets JSON_BODY.
BODY_LIMITS: List[Tuple[str, "re.Pattern[str]", int, str]] = [
    ("POST", re.compile(r"^/api/v1/auth/login/?$"), LOGIN_BODY, "a login"),
    ("POST", re.compile(r"^/api/v1/experiments/?$"), UPLOAD_BODY, "an experiment with its model definition"),
    ("POST", _METRICS_REPORT, METRICS_REPORT_BODY, "a trial's metrics report"),
    ("POST", re.compile(r"^/api/v1/trials/\d+/checkpoints/?$"), TRIAL_REPORT_BODY, "a trial's checkpoint report"),
    ("POST", re.compile(r"^/api/v1/imports/determined/(metrics|logs)/?$"), TRIAL_REPORT_BODY,
     "a batch of imported metric or log rows"),
    ("POST", re.compile(r"^/api/v1/imports/determined/experiments/?$"), UPLOAD_BODY,
     "a batch of imported experiments with their model definitions"),
    # the launch of an interactive task carries its --context directory, as large as a model directory
    ("POST", re.compile(r"^/api/v1/(commands|notebooks|tensorboards|shells)/?$"), UPLOAD_BODY,
     "a task with its context directory"),
]
METRICS_REPORT_HINT = ("report fewer or shorter values at a time (averages rather than per-batch lists); keep "
                       "arrays such as confusion matrices in a checkpoint or a TensorBoard file")

MAX_QUOTED_CHARS = 300
"""At most this many characters of a client's value are quoted in an error message."""
MAX_ERROR_CHARS = 2000
MAX_ERROR_PROBLEMS = 50


_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def body_limit(method: str, path: str) -> Tuple[int, str]:
    """The largest body (bytes) a request to `path` may send, and what such a request is."""
    for route_method, pattern, limit, what in BODY_LIMITS:
        if method == route_method and pattern.match(path):
            return limit, what
    return JSON_BODY, "a request"


def human_size(n: int) -> str:
    if n >= MiB:
        return f"{n / MiB:.0f} MiB" if n % MiB == 0 else f"{n / MiB:.1f} MiB"
    return f"{n / KiB:.0f} KiB" if n >= KiB else f"{n} bytes"


# ---------------------------------------------------------------- quoting client input in errors


def clip(value: Any, limit: int = MAX_QUOTED_CHARS) -> str:
    """`value` as text, cut to `limit` characters with a note of how much was left out."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def clip_repr(value: Any, limit: int = MAX_QUOTED_CHARS) -> str:
    """repr() of a client's value, cut like clip()."""
    if isinstance(value, str) and len(value) > limit:
        return clip(repr(value[:limit + 1])[:-1], limit + 2)
    return clip(repr(value), limit)


def bounded_detail(message: str, problems: Iterable[Any]) -> Tuple[str, List[str]]:
    """An error's message and problems, each cut to a size a client can be sent (never echoing unbounded input)."""
    out: List[str] = []
    extra = 0
    for problem in problems:
        if len(out) < MAX_ERROR_PROBLEMS:
            out.append(clip(problem, MAX_ERROR_CHARS))
        else:
            extra += 1
    if extra:
        out.append(f"… and {extra} more problems")
    return clip(message, MAX_ERROR_CHARS), out


# ---------------------------------------------------------------- JSON depth

_ESCAPES = re.compile(rb"\\.", re.DOTALL)
_STRINGS = re.compile(rb'"[^"]*"')
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # for the depth, an object is a list
_KEEP = bytes(range(256)).translate(None, b'"[]{}')  # every byte but quotes and brackets: deleted


def json_depth_exceeds(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text `body` nests objects and lists deeper than `limit` (malformed text may say yes).

    Linear passes in C, so a large body costs little: drop escapes and everything but quotes and brackets, drop
    strings, make every bracket `[` or `]`, then peel empty pairs `[]` level by level, at most `limit` times.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    if b"\\" in body:
        body = _ESCAPES.sub(b"", body)
    # Quotes next to each other hold nothing but non-brackets between strings: dropping them joins strings at most.
    brackets = body.translate(None, _KEEP).replace(b'""', b"")
    if b'"' in brackets:  # strings that hold brackets
        brackets = _STRINGS.sub(b"", brackets)
    brackets = brackets.translate(_ONE_KIND)
    for _ in range(limit):
        if not brackets:
            return False
        peeled = brackets.replace(b"[]", b"")  # one pass peels one level: `[[][]]` becomes `[]`
        if len(peeled) == len(brackets):  # not well nested: too deep if it opens more than `limit` in a row
            return b"[" * (limit + 1) in brackets
        brackets = peeled
    return bool(brackets)


def too_deep_path(body: bytes, limit: int = MAX_JSON_DEPTH, max_nodes: int = 200_000) -> Optional[str]:
    """The path (`config.data.a…`) of the first value nested deeper than `limit`, when it can be found cheaply."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: List[Tuple[Any, Tuple[str, ...]]] = [(value, ())]
    visited = 0
    while stack and visited < max_nodes:
        item, path = stack.pop()
        visited += 1
        if len(path) > limit:
            return _show_path(path)
        if isinstance(item, dict):
            stack.extend((v, path + (str(k),)) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, path + (f"[{i}]",)) for i, v in reversed(list(enumerate(item))))
    return None


def _show_path(path: Tuple[str, ...], shown: int = 4) -> str:
    text = ""
    for part in path[:shown]:
        part = clip(part, 40)
        text += part if part.startswith("[") or not text else "." + part
    return text + ("…" if len(path) > shown else "")


def too_deep_message(body: bytes, limit: int = MAX_JSON_DEPTH) -> Tuple[str, List[str]]:
    path = too_deep_path(body, limit)
    where = f"{path}: " if path else ""
    return ("the request body is nested too deeply",
            [f"{where}objects and lists may be nested at most {limit} levels deep in a request; flatten the value "
             "(e.g. join keys with '.' or '/')"])


# ---------------------------------------------------------------- the middleware


def _json_error(status: int, message: str, problems: List[str]) -> Tuple[bytes, List[Tuple[bytes, bytes]]]:
    body = json.dumps({"detail": {"message": message, "problems": problems}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return body, headers


class RequestLimitMiddleware:
    """Refuses bodies over their route's limit (413, unread, the connection closed) and JSON nested too deep (400).

    A body within the limit is read whole here and handed on as one message, so routes read it as before.
    """

    def __init__(self, app: Any, trial_note: Optional[Callable[[int, str], None]] = None) -> None:
        self.app = app
        self.trial_note = trial_note  # writes a line into a trial's logs (a refused metrics report of its own)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        headers = dict(scope.get("headers") or [])
        length_header = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if method not in _BODY_METHODS and length_header in (None, b"0") and not chunked:
            await self.app(scope, receive, send)
            return
        if not path.startswith("/api/"):  # pages and files: nothing to read, and nothing is read
            if length_header in (None, b"0") and not chunked:
                await self.app(scope, receive, send)
                return
            await self._refuse(send, 413, f"{method} {clip(path, 100)} takes no request body (only routes under "
                                          "/api/ do); send the request without one", [], close=True)
            return
        limit, what = body_limit(method, path)
        if "principal" not in (scope.get("state") or {}) and limit > UNAUTHENTICATED_BODY:
            limit, what = UNAUTHENTICATED_BODY, "a request without a token"
        if length_header is not None:
            if not length_header.strip().isdigit():
                await self._refuse(send, 400, "invalid Content-Length header", [
                    f"Content-Length: {clip_repr(length_header.decode('latin-1'), 40)} is not a number of bytes"])
                return
            if int(length_header) > limit:
                self._note_refused_report(scope, path, limit, int(length_header))
                await self._too_large(send, method, path, limit, what, int(length_header))
                return
        chunks: List[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                self._note_refused_report(scope, path, limit, None)
                await self._too_large(send, method, path, limit, what, None)
                return
            if chunk:
                chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        del chunks
        if body and path.startswith("/api/") and json_depth_exceeds(body):
            message_text, problems = too_deep_message(body)
            await self._refuse(send, 400, message_text, problems)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _note_refused_report(self, scope: Scope, path: str, limit: int, length: Optional[int]) -> None:
        """A trial's own metrics report refused: say so in its logs, where its user looks for why it failed."""
        match = _METRICS_REPORT.match(path)
        principal = (scope.get("state") or {}).get("principal")
        if (self.trial_note is None or match is None or principal is None
                or getattr(principal, "trial_id", None) != int(match.group(1))):
            return
        size = f"of {human_size(length)} " if length is not None else ""
        self.trial_note(int(match.group(1)), f"a metrics report {size}was refused: at most {human_size(limit)} of "
                                             f"JSON per report; {METRICS_REPORT_HINT}")

    async def _too_large(self, send: Send, method: str, path: str, limit: int, what: str, length: Optional[int]) -> None:
        size = f" ({length:,} bytes)" if length is not None else ""
        hint = ("; leave data sets and outputs out of the model directory (use .detignore)"
                if limit == UPLOAD_BODY else f"; {METRICS_REPORT_HINT}" if limit == METRICS_REPORT_BODY
                and _METRICS_REPORT.match(path) else "")
        await self._refuse(send, 413, f"the request body{size} is larger than the {human_size(limit)} allowed for "
                                      f"{what} ({method} {clip(path, 100)}){hint}", [], close=True)

    @staticmethod
    async def _refuse(send: Send, status: int, message: str, problems: List[str], close: bool = False) -> None:
        body, headers = _json_error(status, message, problems)
        if close:  # the rest of the body is never read: this connection cannot carry another request
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
