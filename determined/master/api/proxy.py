"""The master's proxy: `/proxy/<task id>/...`, HTTP and WebSocket, to the server of an interactive task (JupyterLab,
TensorBoard) listening on 127.0.0.1.

An ASGI middleware (mounted in app.py inside the Host check and the security headers, before the API's auth and
body limits, which are the API's own), because it relays any method, streamed bodies and WebSockets. Each request:
  1. who: `Authorization: Bearer <master token>`, else the proxy's cookie of this task (tasks/access.py), else a
     one-time `?det_open=<code>` (traded for that cookie, then a redirect to the same path without it); none: 401;
  2. may they: the task's owner or an admin (a TensorBoard: every user), the user active; else 403;
  3. the task runs on this master (else 503 naming its state);
  4. the request goes on without the master's credentials (its Authorization header and the proxy's cookie are
     dropped) and with the task's own secret (JupyterLab's token) added; hop-by-hop headers are dropped both ways,
     the body is bounded (MAX_BODY_BYTES), and a redirect of the task may only lead inside /proxy/<task id>/.
     HTTP goes through proxy_relay.py (kept-alive connections, strict framing, a 502 for a task that breaks off
     a short answer); a shell's WebSocket carries its SSH server's TCP stream, other WebSockets are relayed
     frame by frame, uncompressed.
"""
import asyncio
import hashlib
import logging
import time
import re
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

import anyio.to_thread

from determined.master.api import proxy_relay
from determined.master.db import User
from determined.master.db.models import Task
from determined.master.security import auth
from determined.master.tasks import access, records, states

logger = logging.getLogger("determined.master")

PREFIX = "/proxy/"
ALLOWED_TTL_S = 2.0
MAX_CACHED = 10_000
MAX_BODY_BYTES = 1024 * 2**20  # one request's body (a notebook upload)
_TASK_ID = re.compile(r"^[0-9a-fA-F-]{1,64}$")
_HOP = {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer", b"trailers",
        b"transfer-encoding", b"upgrade", b"host", b"content-length"}
# the master's server writes its own Date and Server headers: the task's would be second ones
_ANSWER_DROP = (_HOP - {b"content-length"}) | {b"date", b"server"}
# request headers that never go on to the task (and x-forwarded-*): hop-by-hop, the master's credentials, origins
NOT_FORWARDED = _HOP | {b"authorization", b"cookie", b"origin", b"referer", b"forwarded"}
_WS_DROP = _HOP | {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions",
                   b"sec-websocket-protocol", b"origin", b"authorization", b"cookie"}


def endpoint_parts(endpoint: Tuple[Any, ...]) -> Tuple[int, Optional[str], str, str]:
    """(port, secret, task type, host) of a running task's endpoint (tasks/runner.py; host: a Ray node's IP, else
    this machine)."""
    port, secret, task_type, host = (*endpoint, "127.0.0.1")[:4]
    return port, secret, task_type, host


def shell_over_http(task_id: str) -> str:
    return (f"task {task_id} is a shell: its SSH stream is a WebSocket; connect with `det shell open {task_id}`")


def _split(path: str) -> Tuple[str, str]:
    """(task id, the rest of the path after /proxy/<id>) of a proxy path."""
    rest = path[len(PREFIX):]
    task_id, slash, tail = rest.partition("/")
    return task_id, (slash + tail)


async def _answer(send: Any, status: int, text: str, headers: Optional[List[Tuple[bytes, bytes]]] = None) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store"),
                            (b"content-length", str(len(body)).encode())] + (headers or [])})
    await send({"type": "http.response.body", "body": body})


Decision = Tuple[int, str, Optional[str], Optional[Tuple[Any, ...]]]


class Gate:
    """Steps 1-3 for one app: who sends a request to a task, whether they may, and where the task listens. Shared
    by the ASGI middleware below and the fast lane of plain requests (api/proxy_lane.py), so that both keep one
    cache of decisions."""

    def __init__(self, app: Any) -> None:
        self.app = app
        # (credential, task) -> (until, decision): a page of JupyterLab sends dozens of requests at once, each
        # would read the database; a decision to let one through is kept ALLOWED_TTL_S (a revoked token or a
        # deactivated user is refused at most that much later). Refusals are never kept.
        self._allowed: Dict[str, Tuple[float, Decision]] = {}

    @property
    def master(self) -> Any:
        return self.app.state.master

    def cached_until(self, key: Optional[str], task_id: str) -> Optional[Tuple[float, Decision]]:
        """A decision to let this credential through to the task, still fresh, while the task still runs: (until
        when, on time.monotonic(), the decision)."""
        if key is None:
            return None
        kept = self._allowed.get(key)
        if kept is None or kept[0] < time.monotonic():
            return None
        if not self.running(task_id):  # it ended meanwhile: decide again
            return None
        return kept

    def running(self, task_id: str) -> bool:
        runner = getattr(self.master, "tasks", None)
        return runner is not None and runner.endpoint(task_id) is not None

    def remember(self, key: Optional[str], decision: Decision) -> Optional[float]:
        """Keep a decision to let a credential through; until when it is kept (None: not kept)."""
        if key is None or decision[0] != 200:
            return None
        if len(self._allowed) > MAX_CACHED:
            self._allowed.clear()
        until = time.monotonic() + ALLOWED_TTL_S
        self._allowed[key] = (until, decision)
        return until

    async def check(self, task_id: str, headers: List[Tuple[bytes, bytes]], code: Optional[str]) -> Decision:
        key = _credential_key(headers, task_id) if code is None else None
        found = self.cached_until(key, task_id)
        decision = found[1] if found is not None else None
        if decision is None:
            decision = await anyio.to_thread.run_sync(self.decide, task_id, headers, code)
            self.remember(key, decision)
        return decision

    def note_activity(self, task_id: str) -> None:
        runner = getattr(self.master, "tasks", None)
        if runner is not None:
            runner.note_proxy_activity(task_id)

    def decide(self, task_id: str, headers: List[Tuple[bytes, bytes]], code: Optional[str]) -> Decision:
        """(status, message, a new cookie, the task's (port, secret, type[, host])), reading the database."""
        app, master = self.app, self.master
        store = access.access_of(app)
        token = auth.bearer({k.decode("latin-1"): v.decode("latin-1") for k, v in headers})
        cookie_value = _cookie(headers, access.cookie_name(task_id))
        new_cookie: Optional[str] = None
        with master.read() as s:
            principal: Optional[auth.Principal] = None
            if token is not None:
                principal = auth.resolve(s, token)
                if principal is None:
                    return 401, "invalid or expired token: log in again with `det user login USER`", None, None
            else:
                user_id: Optional[int] = None
                if cookie_value:
                    user_id = store.session_user(cookie_value, task_id)
                if user_id is None and code:
                    redeemed = store.redeem(code, task_id)
                    if redeemed is not None:
                        new_cookie, user_id = redeemed
                if user_id is None:
                    return 401, ("log in first: open the task from the web UI's Tasks page or with `det notebook open "
                                 "ID` (a one-time address), or send Authorization: Bearer <token>"), None, None
                user = s.get(User, user_id)
                if user is None or not user.active:
                    return 401, "the user of this session is no longer active", None, None
                principal = auth.Principal(user.username, user.id, bool(user.admin))
            task = s.get(Task, task_id)
            if task is None:
                return 404, f"no such task {task_id!r} (see `det task list`)", None, None
            if not records.may_open(principal, task):
                return 403, (f"task {task_id} is {task.owner!r}'s: only {task.owner!r} or an admin may open it "
                             f"(you are {principal.username!r})"), None, None
            if new_cookie is not None:
                return 200, "", new_cookie, (0, None, task.task_type)
            state = task.state
        runner = getattr(master, "tasks", None)
        endpoint = runner.endpoint(task_id) if runner is not None else None
        if endpoint is None or state not in (states.STARTING, states.RUNNING):
            return 503, f"task {task_id} has no running server ({state}); see `det task logs {task_id}`", None, None
        return 200, "", None, endpoint


def gate_of(app: Any) -> Gate:
    """The app's Gate (app.py makes it; an app made otherwise gets one here)."""
    gate = getattr(app.state, "proxy_gate", None)
    if gate is None:
        gate = app.state.proxy_gate = Gate(app)
    return gate


class TaskProxyMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app
        self._relay = proxy_relay.Relay()
        self._remote_relays: Dict[str, proxy_relay.Relay] = {}  # a task on a Ray node: its node's IP -> relay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        task_id, rest = _split(scope["path"])
        websocket = scope["type"] == "websocket"
        if not _TASK_ID.match(task_id):
            await self._refuse(scope, receive, send, 404, "no such task: /proxy/<task id>/ (see `det task list`)")
            return
        if not rest and not websocket:  # /proxy/<id> -> /proxy/<id>/ (a path of ours only: no open redirect)
            await _answer(send, 307, "", [(b"location", f"{PREFIX}{task_id}/".encode())])
            return
        headers = scope.get("headers") or []  # names in lower case (ASGI)
        raw_query = scope.get("query_string", b"")
        query = urllib.parse.parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True) \
            if b"det_open" in raw_query else []
        code = next((v for k, v in query if k == "det_open"), None)
        if "app" not in scope or getattr(scope["app"].state, "master", None) is None:
            await self.app(scope, receive, send)
            return
        gate = gate_of(scope["app"])
        status, message, cookie, endpoint = await gate.check(task_id, headers, code)
        if status != 200:
            await self._refuse(scope, receive, send, status, message)
            return
        if cookie is not None and not websocket:  # a spent open code: the cookie, and the path without the code
            kept = urllib.parse.urlencode([(k, v) for k, v in query if k != "det_open"])
            location = f"{PREFIX}{task_id}{rest}" + (f"?{kept}" if kept else "")
            await _answer(send, 303, "", [
                (b"location", location.encode("latin-1", "replace")),
                (b"set-cookie", (f"{access.cookie_name(task_id)}={cookie}; Path={PREFIX}{task_id}/; HttpOnly; "
                                 "SameSite=Lax").encode())])
            return
        assert endpoint is not None
        gate.note_activity(task_id)
        port, secret, task_type, host = endpoint_parts(endpoint)
        if task_type == states.SHELL:  # its SSH server's TCP stream, carried by a WebSocket
            if websocket:
                await self._relay_tcp(receive, send, task_id, port, host)
            else:
                await _answer(send, 400, shell_over_http(task_id))
        elif websocket:
            await self._relay_websocket(scope, receive, send, task_id, port, secret, headers, host)
        else:
            await self._relay_http(scope, receive, send, task_id, port, secret, headers, host)

    async def _refuse(self, scope: Any, receive: Any, send: Any, status: int, message: str) -> None:
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})  # uvicorn answers 403
            return
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        await _answer(send, status, message, extra)

    # ------------------------------------------------------------ HTTP

    def _relay_to(self, host: str) -> proxy_relay.Relay:
        if host == "127.0.0.1":
            return self._relay
        if host not in self._remote_relays:
            self._remote_relays[host] = proxy_relay.Relay(host)
        return self._remote_relays[host]

    async def _relay_http(self, scope: Any, receive: Any, send: Any, task_id: str, port: int, secret: Optional[str],
                          headers: List[Tuple[bytes, bytes]], host: str = "127.0.0.1") -> None:
        target = _raw_path(scope).encode("latin-1")
        query = scope.get("query_string", b"")
        if query:
            target += b"?" + query
        try:
            await self._relay_to(host).relay(receive, send, port, scope["method"], target,
                                             _forward_headers(headers, task_id, secret, port), headers,
                                             lambda raw: _answer_headers(raw, task_id, port), MAX_BODY_BYTES)
        except proxy_relay.BodyTooLarge:
            await _answer(send, 413, f"the request body is over {MAX_BODY_BYTES // 2**20} MiB")
        except proxy_relay.Refused:
            await _answer(send, 502, f"task {task_id} redirected outside /proxy/{task_id}/; refused")
        except proxy_relay.UpstreamError as e:
            await _answer(send, 502, f"task {task_id} did not answer: {e}")
        except ValueError as e:
            await _answer(send, 400, f"this request cannot be relayed to task {task_id}: {e}")

    # ------------------------------------------------------------ WebSocket

    async def _relay_tcp(self, receive: Any, send: Any, task_id: str, port: int, host: str = "127.0.0.1") -> None:
        """A shell: the WebSocket's binary frames to the task's SSH server and back (ssh's ProxyCommand)."""
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            await send({"type": "websocket.close", "code": 1011, "reason": f"task {task_id}: {e.__class__.__name__}"})
            return
        await send({"type": "websocket.accept"})

        async def client_to_task() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("bytes")
                if data is None and message.get("text") is not None:
                    data = message["text"].encode()
                if data:
                    writer.write(data)
                    await writer.drain()

        async def task_to_client() -> None:
            while True:
                data = await reader.read(1 << 18)
                if not data:
                    await send({"type": "websocket.close", "code": 1000})
                    return
                await send({"type": "websocket.send", "bytes": data})

        tasks = [asyncio.ensure_future(client_to_task()), asyncio.ensure_future(task_to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            writer.close()

    async def _relay_websocket(self, scope: Any, receive: Any, send: Any, task_id: str, port: int,
                               secret: Optional[str], headers: List[Tuple[bytes, bytes]],
                               host: str = "127.0.0.1") -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus

        first = await receive()
        if first["type"] != "websocket.connect":
            return
        extra = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers if k not in _WS_DROP]
        cookie = _strip_cookie(headers, task_id)
        if cookie:
            extra.append(("Cookie", cookie))
        if secret:
            extra.append(("Authorization", f"token {secret}"))
        url = f"ws://{host}:{port}{_raw_path(scope)}"
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        try:
            upstream = await connect(url, additional_headers=extra, subprotocols=scope.get("subprotocols") or None,
                                     origin=f"http://{host}:{port}", max_size=None, compression=None,
                                     open_timeout=10, ping_interval=None, proxy=None)
        except (OSError, InvalidStatus, asyncio.TimeoutError) as e:
            await send({"type": "websocket.close", "code": 1011, "reason": f"task {task_id}: {e.__class__.__name__}"})
            return
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

        async def client_to_task() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    await upstream.close()
                    return
                if message.get("bytes") is not None:
                    await upstream.send(message["bytes"])
                elif message.get("text") is not None:
                    await upstream.send(message["text"])

        async def task_to_client() -> None:
            try:
                async for data in upstream:
                    if isinstance(data, bytes):
                        await send({"type": "websocket.send", "bytes": data})
                    else:
                        await send({"type": "websocket.send", "text": data})
            except ConnectionClosed:
                pass
            await send({"type": "websocket.close", "code": upstream.close_code or 1000})

        tasks = [asyncio.ensure_future(client_to_task()), asyncio.ensure_future(task_to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await upstream.close()


def _raw_path(scope: Any) -> str:
    """The request's path as the client sent it (still percent-encoded: `%2F` and `%3F` in a file name stay
    themselves), which the proxy's own check of `/proxy/<id>/` read decoded."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes) and raw.startswith(PREFIX.encode()):
        return raw.decode("latin-1")
    return urllib.parse.quote(scope["path"])


def _credential_key(headers: List[Tuple[bytes, bytes]], task_id: str) -> Optional[str]:
    """What identifies the sender of a request to a task (its bearer token or the proxy's cookie), hashed."""
    token = auth.bearer({"authorization": v.decode("latin-1") for k, v in headers if k == b"authorization"})
    value = token if token is not None else _cookie(headers, access.cookie_name(task_id))
    if not value:
        return None
    return hashlib.sha256(f"{task_id}\0{'b' if token is not None else 'c'}\0{value}".encode()).hexdigest()


def _cookie(headers: List[Tuple[bytes, bytes]], name: str) -> Optional[str]:
    for key, value in headers:
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == name:
                    return v
    return None


def _strip_cookie(headers: List[Tuple[bytes, bytes]], task_id: str) -> str:
    """The request's cookies but the proxy's own (of every task): the task never sees them."""
    parts = []
    for key, value in headers:
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name = part.strip().partition("=")[0]
                if part.strip() and not name.startswith(access.COOKIE_PREFIX):
                    parts.append(part.strip())
    del task_id
    return "; ".join(parts)


def _forward_headers(headers: List[Tuple[bytes, bytes]], task_id: str, secret: Optional[str],
                     port: int) -> List[Tuple[bytes, bytes]]:
    """The client's headers that go on to the task, and the proxy's own (`_added_headers`)."""
    out = [(k, v) for k, v in headers if k not in NOT_FORWARDED and not k.startswith(b"x-forwarded-")]
    return out + _added_headers([(k, v) for k, v in headers if k == b"cookie"], task_id, secret, port)


def _added_headers(cookies: List[Tuple[bytes, bytes]], task_id: str, secret: Optional[str],
                   port: int) -> List[Tuple[bytes, bytes]]:
    """The client's cookies but the proxy's, the task's own secret, and the Host of the task's server."""
    out = []
    cookie = _strip_cookie(cookies, task_id)
    if cookie:
        out.append((b"cookie", cookie.encode("latin-1")))
    if secret:
        out.append((b"authorization", f"token {secret}".encode()))
    out.append((b"host", f"127.0.0.1:{port}".encode()))
    return out


def _answer_headers(raw: List[Tuple[bytes, bytes]], task_id: str, port: int) -> Optional[List[Tuple[bytes, bytes]]]:
    """The task's answer headers to pass on; None when it redirects outside its own /proxy/<id>/ (refused)."""
    out = []
    own = f"{PREFIX}{task_id}/"
    for key, value in raw:
        k = key.lower()
        if k in _ANSWER_DROP:
            continue
        if k == b"set-cookie" and value.decode("latin-1").lstrip().startswith(access.COOKIE_PREFIX):
            continue
        if k == b"location":
            target = value.decode("latin-1").strip()
            parts = urllib.parse.urlsplit(target)
            if parts.scheme or parts.netloc:
                if parts.netloc not in (f"127.0.0.1:{port}", f"localhost:{port}"):
                    return None
                target = urllib.parse.urlunsplit(("", "", parts.path, parts.query, parts.fragment))
            if target.startswith("/") and not target.startswith(own):
                return None
            if target.startswith("//") or "\\" in target:
                return None
            value = target.encode("latin-1")
        out.append((k, value))
    return out
