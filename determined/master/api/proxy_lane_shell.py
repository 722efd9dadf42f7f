"""A shell's SSH stream in the proxy's fast lane (api/proxy_lane.py): once the lane has let a WebSocket handshake to a
shell task through (its owner or an admin, the task running), the client's connection is joined to the task's SSH
server here, frame by frame, without uvicorn's WebSocket protocol and the ASGI messages of api/proxy.py's
`_relay_tcp` (issue 31: `scp` through `det shell` within 1.5x a direct one).

  - from the client: binary (or text, or continuation) frames, which a client must mask (RFC 6455 5.1; unmasked:
    closed with 1002), unmasked by websockets' C routine and written to the SSH server as they come, a frame of up
    to MAX_FRAME bytes (over: 1009) streamed in the pieces it arrives in; pings answered, pongs ignored, a close
    answered and the SSH connection closed; reserved bits or opcodes close with 1002;
  - to the client: what the SSH server sends, as unmasked binary frames; its end is a close frame (1000);
  - flow: while one side cannot take more (its socket's buffer is full), the other is not read;
  - the master's graceful shutdown closes the stream with 1001 (going away).
"""
import asyncio
import base64
import hashlib
import logging
import socket
import struct
from typing import Any, Optional, Tuple

try:
    from websockets.speedups import apply_mask
except ImportError:  # a build of websockets without its C routines
    from websockets.utils import apply_mask

logger = logging.getLogger("determined.master")

MAX_FRAME = 16 * 2**20
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + _GUID).digest())


def handshake(key: bytes) -> bytes:
    """The 101 answer to a WebSocket handshake with Sec-WebSocket-Key `key`."""
    return (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: %s\r\n\r\n" % accept_key(key))


def frame(opcode: int, data: bytes) -> bytes:
    """An unmasked frame of the server's, with FIN set."""
    n = len(data)
    if n < 126:
        return struct.pack("!BB", 0x80 | opcode, n) + data
    if n < 1 << 16:
        return struct.pack("!BBH", 0x80 | opcode, 126, n) + data
    return struct.pack("!BBQ", 0x80 | opcode, 127, n) + data


def no_delay(transport: Any) -> None:
    """TCP_NODELAY on a transport's socket: a small write (a request, an SSH packet) goes out at once."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _rotated(mask: bytes, offset: int) -> bytes:
    k = offset % 4
    return mask[k:] + mask[:k] if k else mask


class _TaskSide(asyncio.Protocol):
    """The connection to the task's SSH server."""

    def __init__(self) -> None:
        self.stream: Optional["ShellStream"] = None
        self.transport: Any = None
        self.ended = False
        self.early = b""  # what the SSH server sent before the client's side was joined (its version line)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        no_delay(transport)

    def data_received(self, data: bytes) -> None:
        if self.stream is None:
            self.early += data
        else:
            self.stream.from_task(data)

    def eof_received(self) -> None:
        self.ended = True
        if self.stream is not None:
            self.stream.task_ended()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.ended = True
        if self.stream is not None:
            self.stream.task_ended()

    def pause_writing(self) -> None:
        if self.stream is not None:
            self.stream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.stream is not None:
            self.stream.transport.resume_reading()


async def connect(host: str, port: int, timeout: float) -> _TaskSide:
    """A connection to the task's SSH server; OSError or asyncio.TimeoutError when there is none."""
    loop = asyncio.get_running_loop()
    _, side = await asyncio.wait_for(loop.create_connection(_TaskSide, host, port), timeout)
    return side


class ShellStream(asyncio.Protocol):
    """The client's side, after the handshake (the client's transport is set to this protocol)."""

    def __init__(self, transport: Any, task: _TaskSide, connections: Any, client: Optional[Tuple[str, int]]) -> None:
        self.transport = transport
        self.task = task
        self.connections = connections
        self.client = client
        self.buf = b""
        self.left = 0  # payload bytes of the current data frame still to come
        self.mask = b""
        self.offset = 0
        self.closing = False
        connections.add(self)
        task.stream = self
        if task.early:
            early, task.early = task.early, b""
            self.from_task(early)
        if task.ended:
            self.task_ended()

    # ------------------------------------------------------------ the client

    def connection_made(self, transport: Any) -> None:  # not called: the lane's transport is handed over
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        buf = self.buf + data if self.buf else data
        self.buf = b""
        pos = 0
        n = len(buf)
        view = memoryview(buf)  # payloads are unmasked from it, not copied out first
        write = self.task.transport.write
        while pos < n:
            if self.left:
                take = min(self.left, n - pos)
                write(apply_mask(view[pos:pos + take], _rotated(self.mask, self.offset)))
                pos += take
                self.left -= take
                self.offset += take
                continue
            if n - pos < 2:
                break
            b0, b1 = buf[pos], buf[pos + 1]
            opcode, length, head = b0 & 0x0F, b1 & 0x7F, 2
            if b0 & 0x70 or not b1 & 0x80 or opcode not in (0x0, 0x1, 0x2, 0x8, 0x9, 0xA):
                self.close(1002)  # reserved bits (no extension was agreed), an unmasked frame, a reserved opcode
                return
            if length == 126:
                head = 4
            elif length == 127:
                head = 10
            if n - pos < head + 4:
                break
            if length == 126:
                length = struct.unpack_from("!H", buf, pos + 2)[0]
            elif length == 127:
                length = struct.unpack_from("!Q", buf, pos + 2)[0]
            mask = buf[pos + head:pos + head + 4]
            if opcode >= 0x8:
                if length > 125 or not b0 & 0x80:
                    self.close(1002)
                    return
                if n - pos < head + 4 + length:
                    break  # a control frame is handled whole
                payload = apply_mask(buf[pos + head + 4:pos + head + 4 + length], mask)
                pos += head + 4 + length
                if opcode == 0x9:
                    self.transport.write(frame(0xA, payload))
                elif opcode == 0x8:
                    self.close(1000)
                    return
                continue
            if length > MAX_FRAME:
                self.close(1009)
                return
            pos += head + 4
            self.left, self.mask, self.offset = length, mask, 0
        if pos < n:
            self.buf = buf[pos:]

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closing = True
        self.connections.discard(self)
        self.task.stream = None
        if self.task.transport is not None:
            self.task.transport.close()

    def pause_writing(self) -> None:
        self.task.transport.pause_reading()

    def resume_writing(self) -> None:
        self.task.transport.resume_reading()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown."""
        self.close(1001)

    # ------------------------------------------------------------ the task

    def from_task(self, data: bytes) -> None:
        if not self.closing:
            self.transport.write(frame(0x2, data))

    def task_ended(self) -> None:
        self.close(1000)

    def close(self, code: int) -> None:
        """The close frame, then the client's connection (once what is buffered is sent) and the task's."""
        if self.closing:
            return
        self.closing = True
        self.task.stream = None
        self.transport.write(frame(0x8, struct.pack("!H", code)))
        self.transport.close()
        if self.task.transport is not None:
            self.task.transport.close()


__all__ = ["MAX_FRAME", "ShellStream", "accept_key", "connect", "frame", "handshake", "no_delay"]
