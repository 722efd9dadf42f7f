"""The fast lane of the master's proxy: a plain HTTP/1.1 request to /proxy/<task id>/ relayed by the master's
listening protocol itself, before uvicorn's request parsing, Starlette and the ASGI middleware.

Why: a request through the master should cost at most 1.3x the same request made directly (issue 31). JupyterLab
answers its small requests in 0.6-0.9 ms; the ASGI path (api/proxy.py) adds 0.3-0.5 ms of Python to each (h11,
Starlette, the middleware stack, two ASGI messages per answer; benchmarks/README.md), this lane a fraction of that.

How: the class given to uvicorn as its HTTP protocol (`front_protocol`) reads the head of each request on a
connection. A plain request to a task (below) it relays itself, with the same Gate (api/proxy.py: who sends it,
may they, where the task listens) and the same header filters as the ASGI path. Anything else, and everything after
it on that connection, goes to uvicorn's protocol with the bytes read so far, untouched (`transport.set_protocol`,
as uvicorn hands a WebSocket upgrade over): the ASGI path stays the one that answers every other case and every
malformed request, because a request the lane does not take is one it never consumed.

A request the lane takes:
  - HTTP/1.1; a method that is a token; a target /proxy/<task id>/... whose task id needs no decoding, without a
    `det_open` code (traded for a cookie by the ASGI path); exactly one Host header, allowed by the master's Host
    allow-list; header names that are tokens and values without control characters; a head within the limit
    uvicorn's h11 applies;
  - no body, or one of at most LANE_BODY_MAX bytes with one Content-Length (no Transfer-Encoding, no Expect, no
    Upgrade), read whole before it is relayed;
  - on a connection the caps of security/connection_limits.py let stay (one they refuse is handed over at once,
    and refused there).
Its answer: the task's status and filtered headers (proxy._answer_headers: a redirect out of /proxy/<id>/ is a 502),
the master's Date and Server, the security headers the task did not set (security/web_security.py), and framing of
the lane's own: the task's Content-Length (an answer of at most BUFFER_BELOW bytes read whole first, so a task that
breaks off gets the client a 502, never a hang), else chunked (the task's chunks re-framed, trailers dropped; an
answer without framing read until the task closes). A task that stops in the middle of a longer answer ends the
client's connection. Connections to task servers are kept per host and port (TCP_NODELAY); a kept one the task
closed meanwhile is replaced once for a request without a body. While the client cannot take more (its socket's
buffer is full), the task's connection is not read.

What is remembered, because a UI polls: Python that runs once per request in a process woken for it costs several
times what it costs in a loop (cold caches), so the lane does not redo work whose input did not change. A client
connection keeps its last request as parsed, with the head sent to the task for it (used again only for the same
bytes, the same decision and the same endpoint of the task), and its last decision (the same credential to the same
task, while fresh and the task runs). A connection to a task keeps what the lane made of each answer head it met
(status, framing, the headers passed on, as lines), keyed by the head without its Date, which the lane drops for the
master's own; at most MAX_KNOWN_ANSWERS, forgotten together when full.
"""
import asyncio
import http
import logging
import re
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from determined.master.api import proxy, proxy_lane_shell, proxy_relay
from determined.master.security import connection_limits, web_security
from determined.master.tasks import states

logger = logging.getLogger("determined.master")

Headers = List[Tuple[bytes, bytes]]

LANE_BODY_MAX = 256 * 1024
DEFAULT_HEAD_LIMIT = 16 * 1024  # uvicorn's h11 bound on a request head that has not ended yet
PAUSE_ABOVE = 256 * 1024  # bytes of the next requests buffered while one is answered: the client is not read
MAX_IDLE_PER_PORT = proxy_relay.MAX_IDLE_PER_PORT
MAX_POOLS = proxy_relay.MAX_POOLS
MAX_KNOWN_ANSWERS = 32
_PREFIX = proxy.PREFIX.encode()
_PHRASES = {s.value: s.phrase.encode() for s in http.HTTPStatus}
_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_TASK_ID = re.compile(rb"^[0-9a-fA-F-]{1,64}$")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_NOT_LANE = frozenset({b"transfer-encoding", b"expect"})
_SPECIAL = _NOT_LANE | {b"host", b"content-length", b"connection", b"upgrade", b"sec-websocket-key",
                        b"sec-websocket-version", b"authorization", b"cookie"}
# what proxy._forward_headers drops, beside the special ones above (hop-by-hop, the master's credentials, origins)
_NOT_FORWARDED = proxy.NOT_FORWARDED
_HEADER = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*)")
_STATUS_LINES = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in http.HTTPStatus}
_SECURITY = web_security.SECURITY_HEADERS + (
    (b"content-security-policy", web_security.CONTENT_SECURITY_POLICY.encode()),)

# an answer's phases
_HEAD, _SMALL, _LENGTH, _CHUNKED, _UNTIL_CLOSE, _DONE = range(6)


class Request:
    __slots__ = ("method", "target", "task_id", "headers", "length", "close", "websocket_key", "raw", "credential",
                 "forward", "cookies", "upstream")

    def __init__(self, method: bytes, target: bytes, task_id: str, headers: Headers, length: int,
                 close: bool, websocket_key: Optional[bytes] = None) -> None:
        self.method = method
        self.target = target
        self.task_id = task_id
        self.headers = headers
        self.length = length  # its Content-Length; -1: none
        self.close = close
        self.websocket_key = websocket_key  # a WebSocket handshake's (the lane takes a shell's)
        self.raw = b""  # the head as it came, for the ASGI path when the lane does not take it after all
        self.credential = b""  # its Authorization and Cookie headers as they came (a connection's memo of its decision)
        self.forward: Headers = []  # the headers that go on to the task as they are (proxy._forward_headers)
        self.cookies: Headers = []  # its Cookie headers (the proxy's own are taken out before they go on)
        self.upstream: Optional[Tuple[Any, bytes]] = None  # (the task's endpoint, the head sent to it)


def parse_request(head: bytes, host_allowed: Callable[[Optional[bytes]], bool]) -> Optional[Request]:
    """The request whose head (without its blank line) is `head`, when the lane takes it; None: the ASGI path
    answers it."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1" or not parts[1].startswith(_PREFIX) or not _TOKEN.match(parts[0]):
        return None
    target = parts[1]
    path, _, query = target.partition(b"?")
    task_id, slash, _ = path[len(_PREFIX):].partition(b"/")
    if not slash or not _TASK_ID.match(task_id) or b"det_open" in query or _BAD_TARGET.search(target):
        return None
    headers: Headers = []
    hosts: List[bytes] = []
    length = -1
    close = upgrade = False
    ws: Dict[bytes, bytes] = {}
    credential: List[bytes] = []
    forward: Headers = []
    cookies: Headers = []
    for line in lines[1:]:
        m = _HEADER.fullmatch(line)  # a token, a colon, a value without control characters (tab aside)
        if m is None:
            return None
        name = m.group(1).lower()
        value = m.group(2).rstrip(b" \t")
        if name in _SPECIAL:
            if name in _NOT_LANE:
                return None
            if name == b"host":
                hosts.append(value)
            elif name == b"content-length":
                if length >= 0 or not value.isdigit() or len(value) > 12:
                    return None
                length = int(value)
            elif name == b"connection":
                tokens = {t.strip().lower() for t in value.split(b",")}
                upgrade = upgrade or b"upgrade" in tokens
                close = close or b"close" in tokens
            elif name in (b"authorization", b"cookie"):
                credential += (name, value)
                if name == b"cookie":
                    cookies.append((name, value))
            else:  # upgrade, sec-websocket-key, sec-websocket-version: once each
                if name in ws:
                    return None
                ws[name] = value
        elif name not in _NOT_FORWARDED and not name.startswith(b"x-forwarded-"):
            forward.append((name, value))
        headers.append((name, value))
    if len(hosts) != 1 or length > LANE_BODY_MAX or not host_allowed(hosts[0]):
        return None
    key: Optional[bytes] = None
    if upgrade or ws:  # only a WebSocket handshake without a body (RFC 6455 4.1)
        key = ws.get(b"sec-websocket-key")
        if not (upgrade and parts[0] == b"GET" and length < 0 and ws.get(b"upgrade", b"").lower() == b"websocket"
                and ws.get(b"sec-websocket-version") == b"13" and key is not None and len(key) == 24):
            return None
    request = Request(parts[0], target, task_id.decode("ascii"), headers, length, close, key)
    request.credential = b"\0".join(credential)
    request.forward, request.cookies = forward, cookies
    return request


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = b"HTTP/1.1 %d %s\r\n" % (status, _PHRASES.get(status, b""))
    return line


def _lines(headers: Headers) -> bytes:
    """Header lines for the client: `headers`, then the security headers they do not set."""
    present = {k for k, _ in headers}
    return b"".join([b"%s: %s\r\n" % kv for kv in headers] +
                    [b"%s: %s\r\n" % kv for kv in _SECURITY if kv[0] not in present])


def _head(status: int, headers: Headers, default_headers: Headers, close: bool) -> bytes:
    """An answer's head for the client: the master's Date and Server, `headers`, the security headers not set."""
    return b"".join((_status_line(status), b"".join([b"%s: %s\r\n" % kv for kv in default_headers]),
                     _lines(headers), b"connection: close\r\n\r\n" if close else b"\r\n"))


def text_answer(status: int, text: str, default_headers: Headers, close: bool) -> bytes:
    """A whole answer of the proxy's own, as api/proxy.py writes it."""
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store"),
               (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return _head(status, headers, default_headers, close) + body


class Dechunker:
    """A chunked body read as it comes: `feed` gives what to send on (re-framed as chunks) and sets `done` at its
    end; UpstreamError for bad framing. Chunk extensions and trailers are dropped."""

    MAX_LINE = 4096

    def __init__(self) -> None:
        self.buf = b""
        self.left = 0  # bytes of the current chunk still to come
        self.state = 0  # 0: a size line, 1: data, 2: its CRLF, 3: trailers, 4: done
        self.done = False
        self.extra = False  # bytes came after the end

    def feed(self, data: bytes) -> bytes:
        out: List[bytes] = []
        buf = self.buf + data if self.buf else data
        self.buf = b""
        pos = 0
        n = len(buf)
        while pos < n:
            if self.state == 1:
                take = min(self.left, n - pos)
                out.append(b"%x\r\n%s\r\n" % (take, buf[pos:pos + take]))
                pos += take
                self.left -= take
                if not self.left:
                    self.state = 2
            elif self.state == 2:
                if n - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise proxy_relay.UpstreamError("a chunk does not end with CRLF")
                pos += 2
                self.state = 0
            elif self.state in (0, 3):
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > self.MAX_LINE:
                        raise proxy_relay.UpstreamError("a chunk's size line is too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if self.state == 3:
                    if not line:
                        self.state = 4
                        self.done = True
                        out.append(b"0\r\n\r\n")
                    continue
                size_text = line.split(b";", 1)[0].strip()
                if not re.fullmatch(rb"[0-9A-Fa-f]{1,15}", size_text):
                    raise proxy_relay.UpstreamError("a chunk's size is not a hexadecimal number")
                self.left = int(size_text, 16)
                self.state = 1 if self.left else 3
            else:
                self.extra = True
                break
        if pos < n and self.state != 4:
            self.buf = buf[pos:]
        return b"".join(out)


class _Answer:
    """What the lane makes of an answer's head: a task's server answers most requests with a head it sent before
    (but for its Date, which the lane replaces with the master's), so a connection keeps what it learnt of each."""

    __slots__ = ("status", "keep", "length", "chunked", "headers", "lines")

    def __init__(self, status: int, keep: bool, length: Optional[int], chunked: bool, headers: Optional[Headers],
                 lines: Optional[bytes]) -> None:
        self.status = status
        self.keep = keep  # HTTP/1.1 without Connection: close, and framed
        self.length = length
        self.chunked = chunked
        self.headers = headers  # what goes on to the client (proxy._answer_headers); None: refused
        self.lines = lines  # those headers and the security headers, as lines


def _without_date(head: bytes) -> bytes:
    """An answer's head without its Date header (the key of what the lane learnt of it)."""
    start = head.find(b"\r\nDate:")
    if start < 0:
        start = head.lower().find(b"\r\ndate:")
        if start < 0:
            return head
    end = head.find(b"\r\n", start + 2)
    return head[:start] + head[end:]


class _Upstream(asyncio.Protocol):
    """One connection to a task's server, kept between requests."""

    def __init__(self, key: Tuple[str, int]) -> None:
        self.key = key
        self.transport: Any = None
        self.exchange: Optional["_Exchange"] = None
        self.closed = False
        self.reused = False
        self.answers: Dict[Tuple[str, bytes], _Answer] = {}  # the answer heads met on it (see _Answer)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        proxy_lane_shell.no_delay(transport)

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # an idle connection the task sends to: not one to keep
            self.close()
            return
        self.exchange.on_data(data)

    def eof_received(self) -> None:
        self.close()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.on_lost()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Pool:
    """Idle connections to task servers, per (host, port)."""

    def __init__(self) -> None:
        self.idle: Dict[Tuple[str, int], List[_Upstream]] = {}
        self.opened = 0

    def take(self, key: Tuple[str, int]) -> Optional[_Upstream]:
        idle = self.idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.closed or conn.transport.is_closing():
                continue
            conn.reused = True
            return conn
        return None

    def give(self, conn: _Upstream) -> None:
        idle = self.idle.get(conn.key)
        if idle is None:
            if len(self.idle) >= MAX_POOLS:
                for conns in self.idle.values():
                    for kept in conns:
                        kept.close()
                self.idle.clear()
            idle = self.idle[conn.key] = []
        if len(idle) < MAX_IDLE_PER_PORT:
            idle.append(conn)
        else:
            conn.close()

    async def connect(self, key: Tuple[str, int]) -> _Upstream:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(lambda: _Upstream(key), key[0], key[1]),
                                             proxy_relay.CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            raise proxy_relay.UpstreamError(f"no connection ({e.__class__.__name__})") from None
        self.opened += 1
        return conn


class _Exchange:
    """One request relayed to a task and its answer relayed back to the client of `front`."""

    __slots__ = ("front", "request", "payload", "key", "conn", "phase", "buf", "got_any", "retried", "reused", "keep",
                 "left", "status", "known", "dechunker")

    def __init__(self, front: "_Front", request: Request, payload: bytes, key: Tuple[str, int]) -> None:
        self.front = front
        self.request = request
        self.payload = payload
        self.key = key
        self.conn: Optional[_Upstream] = None
        self.phase = _HEAD
        self.buf = b""
        self.got_any = False
        self.retried = False
        self.reused = False  # the connection was a kept one
        self.keep = False
        self.left = 0
        self.status = 0
        self.known: Optional[_Answer] = None
        self.dechunker: Optional[Dechunker] = None

    def start(self) -> None:
        conn = self.front.pool.take(self.key)
        if conn is None:
            self.front.loop.create_task(self._connect_and_send())
        else:
            self._send(conn)

    async def _connect_and_send(self) -> None:
        try:
            conn = await self.front.pool.connect(self.key)
        except proxy_relay.UpstreamError as e:
            self.fail(f"task {self.request.task_id} did not answer: {e}")
            return
        if self.front.lost:
            conn.close()
            return
        self._send(conn)

    def _send(self, conn: _Upstream) -> None:
        self.conn = conn
        self.reused = conn.reused
        conn.exchange = self
        if self.front.write_paused:
            conn.transport.pause_reading()
        conn.transport.write(self.payload)

    # ------------------------------------------------------------ the answer

    def on_data(self, data: bytes) -> None:
        self.got_any = True
        try:
            self._on_data(data)
        except proxy_relay.UpstreamError as e:
            self.fail(f"task {self.request.task_id} did not answer: {e}")
        except Exception:  # a bug of the lane: the client's answer ends, the master goes on
            logger.exception("the proxy's fast lane failed relaying an answer of task %s", self.request.task_id)
            self.fail(f"task {self.request.task_id}: the master could not relay its answer")

    def _on_data(self, data: bytes) -> None:
        phase = self.phase
        if phase == _HEAD:
            self.buf += data
            self._on_head()
        elif phase == _SMALL:
            self.buf += data
            if len(self.buf) >= self.left:
                self._small_done()
        elif phase == _LENGTH:
            if len(data) > self.left:
                data = data[:self.left]
                self.keep = False  # the task sent more than its answer: not a connection to keep
            self.left -= len(data)
            self.front.write(data)
            if not self.left:
                self.finish()
        elif phase == _CHUNKED:
            assert self.dechunker is not None
            out = self.dechunker.feed(data)
            if out:
                self.front.write(out)
            if self.dechunker.done:
                self.keep = self.keep and not self.dechunker.extra and not self.dechunker.buf
                self.finish()
        elif phase == _UNTIL_CLOSE:
            self.front.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:  # bytes after the answer's end
            self.keep = False

    def _on_head(self) -> None:
        conn = self.conn
        assert conn is not None
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > proxy_relay.MAX_HEAD_BYTES:
                    raise proxy_relay.UpstreamError(f"the answer's head is over {proxy_relay.MAX_HEAD_BYTES} bytes")
                return
            head = self.buf[:end + 4]
            self.buf = self.buf[end + 4:]
            key = (self.request.task_id, _without_date(head))
            known = conn.answers.get(key)
            if known is not None:
                break
            answer = proxy_relay.parse_answer_head(head)
            if answer is not None:  # else a 1xx answer: not relayed, the final one follows
                known = self._learn(answer)
                if len(conn.answers) >= MAX_KNOWN_ANSWERS:
                    conn.answers.clear()
                conn.answers[key] = known
                break
        task_id = self.request.task_id
        if known.lines is None:
            self.fail(f"task {task_id} redirected outside /proxy/{task_id}/; refused")
            return
        self.keep = known.keep
        self.status = status = known.status
        rest, self.buf = self.buf, b""
        length = known.length
        if self.request.method == b"HEAD" or status in (204, 304):
            self.keep = self.keep and not rest
            self.front.write(self.front.head(status, known.lines))
            self.finish()
        elif length is not None and length <= proxy_relay.BUFFER_BELOW:
            self.phase, self.left, self.known, self.buf = _SMALL, length, known, rest
            if len(rest) >= length:
                self._small_done()
        elif length is not None:
            self.phase, self.left = _LENGTH, length
            self.front.write(self.front.head(status, known.lines))
            if rest:
                self._on_data(rest)
        else:
            assert known.headers is not None
            out = [(k, v) for k, v in known.headers if k != b"content-length"] + [(b"transfer-encoding", b"chunked")]
            self.front.write(self.front.head(status, _lines(out)))
            if known.chunked:
                self.phase, self.dechunker = _CHUNKED, Dechunker()
            else:
                self.phase, self.keep = _UNTIL_CLOSE, False
            if rest:
                self._on_data(rest)

    def _learn(self, answer: Tuple[int, Headers, bool]) -> "_Answer":
        status, raw, keep = answer
        length, chunked, framed = proxy_relay.answer_framing(raw)
        out = proxy._answer_headers(raw, self.request.task_id, self.key[1])
        return _Answer(status, keep and framed, length, chunked, out, None if out is None else _lines(out))

    def _small_done(self) -> None:
        body, extra = self.buf[:self.left], self.buf[self.left:]
        self.buf = b""
        if extra:
            self.keep = False
        assert self.known is not None and self.known.lines is not None
        self.front.write(self.front.head(self.status, self.known.lines) + body)
        self.finish()

    def on_lost(self) -> None:
        """The task's connection ended."""
        phase = self.phase
        if phase == _DONE:
            return
        self.conn = None
        if phase == _HEAD and not self.got_any and not self.retried and self.request.length <= 0 and \
                self.reused:
            self.retried = True  # a kept connection the task had closed: once more on a new one
            self.front.loop.create_task(self._connect_and_send())
            return
        if phase == _UNTIL_CLOSE:
            self.front.write(b"0\r\n\r\n")
            self.finish()
        elif phase in (_HEAD, _SMALL):
            self.fail(f"task {self.request.task_id} did not answer: the task closed the connection in the middle of "
                      "its answer" if self.got_any else
                      f"task {self.request.task_id} did not answer: the connection ended")
        else:
            logger.info("a task's answer ended early (task %s)", self.request.task_id)
            self.phase = _DONE
            self.front.abort()

    # ------------------------------------------------------------ ends

    def fail(self, message: str) -> None:
        """Before the answer's head went out: a 502 of the proxy's own; after: the client's connection ends."""
        if self.phase == _DONE:
            return
        started = self.phase not in (_HEAD, _SMALL)
        self.phase = _DONE
        self._drop_conn()
        if started:
            self.front.abort()
        else:
            self.front.answer(502, message)

    def finish(self) -> None:
        self.phase = _DONE
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.exchange = None
            if self.keep and not conn.closed:
                if self.front.write_paused:
                    conn.transport.resume_reading()
                self.front.pool.give(conn)
            else:
                conn.close()
        self.front.exchange_done()

    def _drop_conn(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.exchange = None
            conn.close()

    def cancel(self) -> None:
        """The client went away."""
        self.phase = _DONE
        self._drop_conn()

    def pause(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.transport.pause_reading()

    def resume(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.transport.resume_reading()


class _Front(asyncio.Protocol):
    """What front_protocol's class is: see the module's docstring. Class attributes set there: `inner` (uvicorn's
    protocol class to hand over to), `pool`, `caps`."""

    inner: type = object
    pool: Pool = Pool()
    caps: Tuple[int, int] = (connection_limits.MAX_CONNECTIONS, connection_limits.MAX_PER_ADDRESS)

    def __init__(self, config: Any, server_state: Any, app_state: Dict[str, Any],
                 _loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self.config = config
        self.server_state = server_state
        self.app_state = app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.connections = server_state.connections
        state = getattr(config.app, "state", None)
        self.gate: Optional[proxy.Gate] = getattr(state, "proxy_gate", None)
        hosts = getattr(state, "allowed_hosts", None)
        self.host_allowed: Callable[[Optional[bytes]], bool] = (
            (lambda header: True) if hosts is None else
            web_security.HostAllowListMiddleware(None, hosts=list(hosts)).allows)
        self.head_limit = getattr(config, "h11_max_incomplete_event_size", None) or DEFAULT_HEAD_LIMIT
        self.transport: Any = None
        self.client: Optional[Tuple[str, int]] = None
        self.buf = b""
        self.exchange: Optional[_Exchange] = None
        self.pending = False  # a decision is being read in a thread
        self.keep_alive: Optional[asyncio.TimerHandle] = None
        self.idle_since: Optional[float] = None
        self.memo: Optional[Tuple[bytes, str, float, proxy.Decision]] = None
        self.added: Optional[Tuple[Any, bytes]] = None  # the proxy's own request headers of the last request
        self.last: Optional[Request] = None
        self.defaults: Tuple[Any, bytes] = (None, b"")
        self.close_after = False
        self.write_paused = False
        self.read_paused = False
        self.lost = False
        self.in_next = False
        self.handed_over = False

    @property
    def default_headers(self) -> Headers:
        return self.server_state.default_headers

    def head(self, status: int, lines: bytes) -> bytes:
        """An answer's head: its status, the master's Date and Server, `lines` (see _lines)."""
        defaults = self.server_state.default_headers  # uvicorn's, a new list each second
        if self.defaults[0] is not defaults:
            self.defaults = (defaults, b"".join([b"%s: %s\r\n" % kv for kv in defaults]))
        return b"".join((_status_line(status), self.defaults[1], lines,
                         b"connection: close\r\n\r\n" if self.close_after else b"\r\n"))

    # ------------------------------------------------------------ the connection

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else None
        if self.gate is None or connection_limits.refusal(
                [c.client for c in self.connections] + [self.client], self.client, *self.caps) is not None:
            self._hand_over()  # the capped protocol refuses it, and says why
            return
        self.connections.add(self)
        self._arm_keep_alive()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.lost = True
        self.connections.discard(self)
        self._stop_keep_alive()
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.exchange is None and not self.pending:
            self._next()
        elif len(self.buf) > PAUSE_ABOVE and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.exchange is not None:
            self.exchange.pause()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.exchange is not None:
            self.exchange.resume()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now when idle, else after the answer under way."""
        if self.exchange is None and not self.pending:
            self.transport.close()
        else:
            self.close_after = True

    def _arm_keep_alive(self) -> None:
        """Idle from now: closed after the keep-alive timeout unless a request comes. One timer per connection,
        moved on when it fires early (not re-made for each request)."""
        self.idle_since = self.loop.time()
        if self.keep_alive is None:
            self.keep_alive = self.loop.call_at(self.idle_since + self.config.timeout_keep_alive, self._idle)

    def _disarm_keep_alive(self) -> None:
        self.idle_since = None

    def _stop_keep_alive(self) -> None:
        self.idle_since = None
        if self.keep_alive is not None:
            self.keep_alive.cancel()
            self.keep_alive = None

    def _idle(self) -> None:
        self.keep_alive = None
        if self.idle_since is None or self.lost:
            return  # busy: armed again when it is idle
        due = self.idle_since + self.config.timeout_keep_alive
        if self.loop.time() < due:
            self.keep_alive = self.loop.call_at(due, self._idle)
        elif self.exchange is None and not self.pending and not self.transport.is_closing():
            self.transport.close()

    def _hand_over(self) -> None:
        """uvicorn's protocol takes the connection from here, with the bytes read so far."""
        self._pass_on(self.inner(self.config, self.server_state, self.app_state, self.loop), made=True)

    def _pass_on(self, protocol: Any, made: bool) -> None:
        """Another protocol takes the connection (and its count in the caps) from here, with the bytes read so far
        and the flow control as it stands; `made`: it is told connection_made first."""
        self.handed_over = True
        self.connections.discard(self)
        self._stop_keep_alive()
        self.transport.set_protocol(protocol)
        if made:
            protocol.connection_made(self.transport)
        if self.write_paused:
            protocol.pause_writing()
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        data, self.buf = self.buf, b""
        if data:
            protocol.data_received(data)

    # ------------------------------------------------------------ requests

    def _next(self) -> None:
        """Take the buffered requests while they are the lane's, one at a time."""
        if self.in_next:
            return
        self.in_next = True
        try:
            while self.exchange is None and not self.pending and not self.lost and not self.handed_over:
                if self.close_after:
                    self.transport.close()
                    return
                buf = self.buf
                if not buf:
                    if self.read_paused:
                        self.read_paused = False
                        self.transport.resume_reading()
                    return
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    line_end = buf.find(b"\r\n")
                    if (line_end >= 0 and b" /proxy/" not in buf[:line_end]) or len(buf) > self.head_limit:
                        self._hand_over()
                    elif line_end < 0 and len(buf) >= 16 and b" /proxy/" not in buf[:64]:
                        self._hand_over()
                    return
                if end + 4 > self.head_limit:
                    self._hand_over()
                    return
                last = self.last
                if last is not None and last.raw == buf[:end + 4]:
                    request = last
                else:
                    request = parse_request(buf[:end], self.host_allowed)
                    self.last = request
                if request is None:
                    self._hand_over()
                    return
                request.raw = buf[:end + 4]
                total = end + 4 + max(request.length, 0)
                if len(buf) < total:
                    return  # the rest of its body is still to come
                self._disarm_keep_alive()
                body = buf[end + 4:total]
                self.buf = buf[total:]
                self.close_after = self.close_after or request.close
                self._take(request, body)
        finally:
            self.in_next = False

    def _take(self, request: Request, body: bytes) -> None:
        gate = self.gate
        assert gate is not None
        memo = self.memo  # this connection's last decision: the same credential, to the same task, still fresh
        if memo is not None and memo[0] == request.credential and memo[1] == request.task_id \
                and memo[2] > time.monotonic() and gate.running(request.task_id):
            self._relay(request, body, memo[3])
            return
        key = proxy._credential_key(request.headers, request.task_id)
        found = gate.cached_until(key, request.task_id)
        if found is not None:
            self.memo = (request.credential, request.task_id, found[0], found[1])
            self._relay(request, body, found[1])
            return
        self.pending = True
        future = self.loop.run_in_executor(None, self.gate.decide, request.task_id, request.headers, None)
        future.add_done_callback(lambda f: self._decided(request, body, key, f))

    def _decided(self, request: Request, body: bytes, key: Optional[str], future: "asyncio.Future[Any]") -> None:
        self.pending = False
        if self.lost:
            return
        try:
            decision = future.result()
        except Exception:
            logger.exception("the proxy could not decide on a request to task %s", request.task_id)
            self.answer(503, "the master could not read who may open this task; try again in a moment")
            return
        assert self.gate is not None
        until = self.gate.remember(key, decision)
        if until is not None:
            self.memo = (request.credential, request.task_id, until, decision)
        self._relay(request, body, decision)  # its answer, a whole one of the proxy's own, goes on to the next

    def _relay(self, request: Request, body: bytes, decision: proxy.Decision) -> None:
        assert self.gate is not None
        status, message, _, endpoint = decision
        task_id = request.task_id
        if request.websocket_key is not None and (status != 200 or endpoint is None):
            self.buf = request.raw + self.buf  # refused as the ASGI path refuses a WebSocket (it decides again)
            self._hand_over()
            return
        if status != 200 or endpoint is None:
            self.answer(status, message)
            return
        port, secret, task_type, host = proxy.endpoint_parts(endpoint)
        if request.websocket_key is not None:
            if status == 200 and task_type == states.SHELL:
                self.pending = True
                self.loop.create_task(self._open_shell(request, host, port))
            else:  # a notebook's WebSocket: relayed frame by frame by the ASGI path, which decides again (cached)
                self.buf = request.raw + self.buf
                self._hand_over()
            return
        if task_type == states.SHELL:
            self.answer(400, proxy.shell_over_http(task_id))
            return
        if task_type == states.TENSORBOARD:  # in use (a notebook's use is read from Jupyter)
            self.gate.note_activity(task_id)
        if request.upstream is not None and request.upstream[0] == endpoint:
            self.exchange = _Exchange(self, request, request.upstream[1] + body, (host, port))
            self.exchange.start()
            return
        added_key = (task_id, secret, port, tuple(request.cookies))
        if self.added is None or self.added[0] != added_key:  # a client's next request: mostly the same cookies
            self.added = (added_key, b"".join([b"%s: %s\r\n" % kv for kv in proxy._added_headers(
                request.cookies, task_id, secret, port)]))
        lines = [b"%s %s HTTP/1.1\r\n" % (request.method, request.target)]
        lines += [b"%s: %s\r\n" % kv for kv in request.forward]
        lines.append(self.added[1])
        if request.length >= 0:  # as the client framed it (a POST of nothing keeps its Content-Length: 0)
            lines.append(b"content-length: %d\r\n" % request.length)
        lines.append(b"\r\n")
        # every part was checked by parse_request (the added ones are the master's own): no header or request
        # can be injected
        head = b"".join(lines)
        request.upstream = (endpoint, head)
        self.exchange = _Exchange(self, request, head + body, (host, port))
        self.exchange.start()

    async def _open_shell(self, request: Request, host: str, port: int) -> None:
        """A shell's WebSocket: its SSH server's stream joined to this connection (api/proxy_lane_shell.py)."""
        assert request.websocket_key is not None
        try:
            side = await proxy_lane_shell.connect(host, port, proxy_relay.CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            self.pending = False
            self.close_after = True
            self.answer(502, f"task {request.task_id} did not answer: no connection ({e.__class__.__name__})")
            return
        if self.lost:
            side.transport.close()
            return
        self.transport.write(proxy_lane_shell.handshake(request.websocket_key))
        self._pass_on(proxy_lane_shell.ShellStream(self.transport, side, self.connections, self.client), made=False)

    # ------------------------------------------------------------ to the client

    def write(self, data: bytes) -> None:
        if not self.lost:
            self.transport.write(data)

    def answer(self, status: int, text: str) -> None:
        """A whole answer of the proxy's own (a refusal, a 502), then the next request."""
        self.write(text_answer(status, text, self.default_headers, self.close_after))
        self.exchange_done()

    def abort(self) -> None:
        """An answer that cannot be completed: the client's connection ends, so it knows."""
        self.exchange = None
        self.transport.close()

    def exchange_done(self) -> None:
        self.exchange = None
        if self.lost:
            return
        if self.close_after:
            self.transport.close()
            return
        self._arm_keep_alive()
        self._next()


def front_protocol(inner: type, caps: Optional[Tuple[int, int]] = None) -> type:
    """The master's HTTP protocol for uvicorn: the lane in front of `inner` (uvicorn's, capped)."""
    return type("ProxyLaneProtocol", (_Front,), {"inner": inner, "pool": Pool(),
                                                 "caps": caps or connection_limits.caps()})


__all__ = ["Dechunker", "LANE_BODY_MAX", "Pool", "Request", "front_protocol", "parse_request", "text_answer"]
