"""The master proxy's HTTP/1.1 relay to a task's server (api/proxy.py; on 127.0.0.1, or on the IP of the Ray node
it runs on): one request of the ASGI app forwarded over a kept-alive connection, and the task's answer relayed back.

Written on asyncio streams rather than a general HTTP client: a proxied request should cost little more than the
same request made directly (issue 31; benchmarks/tasks_proxy.py). It does only what a relay to a task's server
needs, and is strict about the rest:
  - the request: its head is written from parts the proxy checked (a method that is a token, a target and header
    values with no control characters: nothing can inject a header or a second request); a body keeps its
    Content-Length, or is sent chunked when the client streamed it; over `max_body` it is refused (BodyTooLarge);
  - the answer: a head of at most MAX_HEAD_BYTES; 1xx answers skipped; no body for HEAD, 204 and 304;
    Content-Length, chunked (chunk size lines bounded, trailers dropped) or, for neither, read until the task
    closes; an answer of at most BUFFER_BELOW bytes is read whole before anything goes to the client, so a task
    that closes in the middle of it gets the client a 502 (UpstreamError), never a hang; a longer one is streamed,
    and cut short (the client's connection closed) if the task stops sending it;
  - connections: kept per event loop and port of the Relay's host (at most MAX_IDLE_PER_PORT idle each) when both
    sides allow it (HTTP/1.1, no `Connection: close`, the answer read to its end); a request without a body that
    meets a kept connection the task has closed meanwhile is sent once more on a new one; TCP_NODELAY on all.
"""
import asyncio
import logging
import re
import socket
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("determined.master")

Headers = List[Tuple[bytes, bytes]]

MAX_HEAD_BYTES = 64 * 1024
BUFFER_BELOW = 64 * 1024
READ_SIZE = 256 * 1024
MAX_IDLE_PER_PORT = 16
MAX_POOLS = 256
CONNECT_TIMEOUT_S = 10.0
_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEX = re.compile(rb"^[0-9A-Fa-f]{1,15}$")
_ANSWER_HEADER = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*)", re.DOTALL)


class UpstreamError(Exception):
    """The task's server did not answer with a whole, valid HTTP answer (the client gets a 502)."""


class BodyTooLarge(Exception):
    """The request's body is over the proxy's bound (the client gets a 413)."""


class Refused(Exception):
    """The answer's headers were refused by the proxy's filter (e.g. a redirect out of the task's path)."""


class _Conn:
    __slots__ = ("reader", "writer", "reused", "loop")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.loop = asyncio.get_running_loop()

    def close(self) -> None:
        try:
            self.writer.close()
        except RuntimeError:  # its event loop is closed already
            pass


def request_head(method: str, target: bytes, headers: Headers) -> bytes:
    """The request line and headers, checked: ValueError names what may not be sent."""
    if not _TOKEN.match(method.encode("latin-1")):
        raise ValueError(f"the method {method[:20]!r} is not an HTTP token")
    if not target.startswith(b"/") or _BAD_TARGET.search(target):
        raise ValueError("the path holds a space or a control character")
    lines = [b"%s %s HTTP/1.1\r\n" % (method.encode("latin-1"), target)]
    for key, value in headers:
        if not _TOKEN.match(key) or _BAD_VALUE.search(value):
            raise ValueError(f"the header {key[:40]!r} holds a control character")
        lines.append(b"%s: %s\r\n" % (key, value))
    lines.append(b"\r\n")
    return b"".join(lines)


class Relay:
    """Kept-alive connections to task servers and the relay of one request over them."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._idle: Dict[Tuple[int, int], List[_Conn]] = {}
        self.opened = 0  # connections opened, for tests and benchmarks

    async def _connect(self, port: int) -> _Conn:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, port, limit=MAX_HEAD_BYTES), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            raise UpstreamError(f"no connection ({e.__class__.__name__})") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened += 1
        return _Conn(reader, writer)

    def _take(self, port: int) -> Optional[_Conn]:
        loop = asyncio.get_running_loop()
        idle = self._idle.get((id(loop), port))
        while idle:
            conn = idle.pop()
            if conn.loop is not loop:  # a loop gone, whose id the running one reuses: its connections are dead
                idle.clear()
                return None
            if conn.reader.at_eof() or conn.writer.is_closing():
                conn.close()
                continue
            conn.reused = True
            return conn
        return None

    def _give_back(self, port: int, conn: _Conn) -> None:
        key = (id(asyncio.get_running_loop()), port)
        idle = self._idle.get(key)
        if idle is None:
            if len(self._idle) >= MAX_POOLS:  # mostly pools of event loops long gone (tests): forget them
                for (loop_id, _), conns in self._idle.items():
                    if loop_id == key[0]:
                        for kept in conns:
                            kept.close()
                self._idle.clear()
            idle = self._idle[key] = []
        if len(idle) < MAX_IDLE_PER_PORT:
            idle.append(conn)
        else:
            conn.close()

    async def relay(self, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]],
                    port: int, method: str, target: bytes, headers: Headers, request_headers: Headers,
                    filter_answer: Callable[[Headers], Optional[Headers]], max_body: int) -> None:
        """Send the request (its `headers`, already filtered, without framing) to the task on `port`, and its
        answer (headers through `filter_answer`) to `send`. `request_headers`, the client's, say how its body is
        framed. Raises UpstreamError, BodyTooLarge or Refused before anything was sent to the client; once the
        answer has started, a task that stops sending ends the client's connection instead."""
        length: Optional[int] = None
        chunked = False
        for key, value in request_headers:
            if key == b"content-length":
                if not value.strip().isdigit():
                    raise ValueError("its Content-Length is not a number")
                length = int(value)
            elif key == b"transfer-encoding":
                chunked = True
        if chunked:
            length = None
        elif length is not None and length > max_body:
            raise BodyTooLarge()
        framing: Headers = []
        if length is not None:
            framing.append((b"content-length", str(length).encode()))
        elif chunked:
            framing.append((b"transfer-encoding", b"chunked"))
        head = request_head(method, target, headers + framing)
        has_body = chunked or bool(length)
        conn = self._take(port)
        if conn is None:
            conn = await self._connect(port)
        keep = False
        try:
            try:
                answer = await self._send_request(conn, head, receive if has_body else None, chunked, max_body)
            except UpstreamError:
                if not conn.reused or has_body:
                    raise
                conn.close()  # a kept connection the task had closed: once more on a new one
                conn = await self._connect(port)
                answer = await self._send_request(conn, head, None, False, max_body)
            keep = await self._answer(conn, answer, method, receive, send, filter_answer)
        finally:
            if keep:
                self._give_back(port, conn)
            else:
                conn.close()

    async def _send_request(self, conn: _Conn, head: bytes, receive: Optional[Callable[[], Awaitable[Any]]],
                            chunked: bool, max_body: int) -> Tuple[int, Headers, bool]:
        writer = conn.writer
        try:
            writer.write(head)
            if receive is not None:
                size = 0
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client went away
                        raise UpstreamError("the client disconnected while sending the body")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > max_body:
                        raise BodyTooLarge()
                    if chunk:
                        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                        await writer.drain()
                    if not message.get("more_body", False):
                        break
                if chunked:
                    writer.write(b"0\r\n\r\n")
            await writer.drain()
            return await _read_head(conn.reader)
        except (OSError, asyncio.IncompleteReadError) as e:
            raise UpstreamError(f"the connection ended ({e.__class__.__name__})") from None

    async def _answer(self, conn: _Conn, answer: Tuple[int, Headers, bool], method: str,
                      receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]],
                      filter_answer: Callable[[Headers], Optional[Headers]]) -> bool:
        """Relay the answer; whether the connection may be kept."""
        status, raw, keep = answer
        reader = conn.reader
        length, chunked, framed = answer_framing(raw)
        keep = keep and framed
        out = filter_answer(raw)
        if out is None:
            raise Refused()
        if chunked:
            out = [(k, v) for k, v in out if k != b"content-length"]
        if method == "HEAD" or status in (204, 304):
            await send({"type": "http.response.start", "status": status, "headers": out})
            await send({"type": "http.response.body", "body": b""})
            return keep
        if length is not None and length <= BUFFER_BELOW:
            try:
                body = await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError):
                raise UpstreamError("the task closed the connection in the middle of its answer") from None
            await send({"type": "http.response.start", "status": status, "headers": out})
            await send({"type": "http.response.body", "body": body})
            return keep
        if not chunked and length is None:
            keep = False  # no framing: the body is all the task sends until it closes
        await send({"type": "http.response.start", "status": status, "headers": out})
        # streamed: stop when the client goes away (the ASGI server drops what is sent to a closed connection)
        current = asyncio.current_task()
        watcher = asyncio.ensure_future(_disconnect(receive))

        def client_gone(_: Any) -> None:
            if current is not None:
                current.cancel()
        watcher.add_done_callback(client_gone)
        try:
            if chunked:
                await _relay_chunked(reader, send)
            elif length is not None:
                await _relay_length(reader, send, length)
            else:
                await _relay_until_close(reader, send)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return keep
        except (OSError, asyncio.IncompleteReadError, UpstreamError, asyncio.LimitOverrunError, ValueError) as e:
            logger.info("a task's answer ended early on port %s: %s", conn.writer.get_extra_info("peername"), e)
            return False  # the ASGI server closes the client's connection: its answer is incomplete
        except asyncio.CancelledError:
            if not watcher.done() or watcher.cancelled() or current is None:
                raise
            current.uncancel()  # the client went away: not a cancellation of the server's
            return False
        finally:
            watcher.remove_done_callback(client_gone)
            watcher.cancel()


async def _disconnect(receive: Callable[[], Awaitable[Any]]) -> None:
    """Returns when the client has gone away (what is left of a request's body is dropped)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        if not message.get("more_body", False):
            break
    # past the body's end an ASGI server's receive() only returns when the client goes away
    while (await receive())["type"] != "http.disconnect":
        await asyncio.get_running_loop().create_future()  # one that does not wait (a test's): nothing to watch


async def _read_head(reader: asyncio.StreamReader) -> Tuple[int, Headers, bool]:
    """(status, headers with lower-case names, whether the connection may be kept) of the next final answer."""
    while True:
        try:
            data = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise UpstreamError(f"the answer's head is over {MAX_HEAD_BYTES} bytes") from None
        answer = parse_answer_head(data)
        if answer is not None:
            return answer
        # 1xx (100 Continue, 103 Early Hints): not relayed; the final answer follows


def parse_answer_head(data: bytes) -> Optional[Tuple[int, Headers, bool]]:
    """(status, headers with lower-case names, whether the connection may be kept) of an answer's head (its bytes
    up to and with the blank line), None for a 1xx answer (not relayed: the final one follows); UpstreamError for
    a head that is not HTTP/1.x or a switch of protocols."""
    lines = data[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not parts[1].isdigit() \
            or len(parts[1]) != 3:
        raise UpstreamError("the answer's status line is not HTTP/1.x")
    status = int(parts[1])
    if status < 100:
        raise UpstreamError("the answer's status is not 100-599")
    headers: Headers = []
    keep = parts[0] == b"HTTP/1.1"
    for line in lines[1:]:
        m = _ANSWER_HEADER.fullmatch(line)
        if m is None:
            raise UpstreamError("an answer's header line is malformed")
        name = m.group(1).lower()
        value = m.group(2).rstrip(b" \t")
        if name == b"connection" and b"close" in value.lower():
            keep = False
        headers.append((name, value))
    if status == 101:
        raise UpstreamError("the task switched protocols on a plain HTTP request")
    if status >= 200:
        return status, headers, keep
    return None


def answer_framing(headers: Headers) -> Tuple[Optional[int], bool, bool]:
    """(Content-Length, chunked, whether the connection may still be kept) of an answer's headers; UpstreamError
    for a Content-Length that is not one number. An encoding other than chunked is read until the task closes."""
    length: Optional[int] = None
    chunked = False
    keep = True
    for key, value in headers:
        if key == b"transfer-encoding":
            if value.lower().rstrip().endswith(b"chunked"):
                chunked = True
            else:
                keep = False
        elif key == b"content-length":
            text = value.strip()
            if not text.isdigit() or (length is not None and int(text) != length):
                raise UpstreamError("the answer's Content-Length is not one number")
            length = int(text)
    if chunked:
        length = None
    return length, chunked, keep


async def _relay_length(reader: asyncio.StreamReader, send: Callable[[Any], Awaitable[None]], length: int) -> None:
    left = length
    while left:
        data = await reader.read(min(left, READ_SIZE))
        if not data:
            raise UpstreamError(f"the task closed the connection {left} bytes before the end of its answer")
        left -= len(data)
        await send({"type": "http.response.body", "body": data, "more_body": True})


async def _relay_until_close(reader: asyncio.StreamReader, send: Callable[[Any], Awaitable[None]]) -> None:
    while True:
        data = await reader.read(READ_SIZE)
        if not data:
            return
        await send({"type": "http.response.body", "body": data, "more_body": True})


async def _relay_chunked(reader: asyncio.StreamReader, send: Callable[[Any], Awaitable[None]]) -> None:
    while True:
        line = await reader.readuntil(b"\r\n")  # bounded by the reader's limit (MAX_HEAD_BYTES)
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not _HEX.match(size_text):
            raise UpstreamError("a chunk's size is not a hexadecimal number")
        size = int(size_text, 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers: dropped
                pass
            return
        while size:
            data = await reader.read(min(size, READ_SIZE))
            if not data:
                raise UpstreamError("the task closed the connection inside a chunk")
            size -= len(data)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        if await reader.readexactly(2) != b"\r\n":
            raise UpstreamError("a chunk does not end with CRLF")
