"""ssh's ProxyCommand for `det shell`: `python -m determined.cli.tunnel MASTER_URL SHELL_ID [--user USER]` carries
stdin and stdout over a WebSocket to `<master>/proxy/<shell id>/`, the master's proxy, which relays it to the
shell's SSH server. It authenticates as USER with the token `det user login` cached (the shell's owner or an
admin; anyone else is refused before a byte reaches the shell).

ssh starts it for every connection (every `scp`), so it starts lean: the cached token is read without the HTTP
client's imports, and the WebSocket is a small client of its own on a socket (binary frames masked by websockets'
C routine, answers to pings, the close handshake). It falls back to the full client (`Session`, which logs in
again when the cached token was refused or is missing) and, behind an HTTP proxy set in the environment, to the
websockets library, which goes through it.
"""
import argparse
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import urllib.parse
from typing import Any, BinaryIO, List, Optional, Tuple

READ_SIZE = 1 << 18  # one frame at most: what ssh has written to our stdin
PIPE_BYTES = 1 << 20
MAX_FRAME = 64 * 2**20
MAX_HEAD = 64 * 1024
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


class Refused(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(status)
        self.status, self.body = status, body


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m determined.cli.tunnel")
    parser.add_argument("master")
    parser.add_argument("shell_id")
    parser.add_argument("--user", default=None)
    args = parser.parse_args(argv)
    master = args.master.strip().rstrip("/")
    if "://" not in master:
        master = "http://" + master
    from determined import errors

    if any(os.environ.get(v) or os.environ.get(v.upper()) for v in _PROXY_VARIABLES):
        try:
            return _through_library(master, args.shell_id, args.user)
        except errors.DeterminedError as e:
            print(f"det tunnel: {e}", file=sys.stderr)
            return 1

    path = f"/proxy/{args.shell_id}/"
    token = _cached_token(master, args.user)
    try:
        try:
            if token is None:
                raise Refused(401, b"")
            sock, reader = _open(master, path, token)
        except Refused as e:
            if e.status != 401:
                raise
            sock, reader = _open(master, path, _session_token(master, args.shell_id, args.user))
    except errors.DeterminedError as e:
        print(f"det tunnel: {e}", file=sys.stderr)
        return 1
    except Refused as e:
        print(f"det tunnel: the master refused the connection to shell {args.shell_id} (HTTP {e.status}): "
              f"{e.body.decode(errors='replace')[:300]}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"det tunnel: cannot open the connection to shell {args.shell_id} through {master}: {e}",
              file=sys.stderr)
        return 1
    return _Stream(sock, reader).relay()


# ------------------------------------------------------------ the token


def _cached_token(master: str, user: Optional[str]) -> Optional[str]:
    """The token `det user login` cached for `user` on this master, or None (then Session decides), read the way
    Session reads it (determined/common/api/_session.py) but without importing it and its HTTP client."""
    if os.environ.get("DET_SESSION_TOKEN") and user is None:
        return None
    try:
        cache = _token_cache()
        key = master
        parts = urllib.parse.urlsplit(master)
        if parts.hostname in _LOOPBACK:  # a master on this machine is cached under its data dir
            info = json.loads(_get(master, "/api/v1/master/info"))
            if isinstance(info, dict) and info.get("data_dir"):
                key = f"local:{info['data_dir']}"
        user = user or os.environ.get("DET_USER") or cache.last_user(key)
        return cache.get_token(key, user) if user else None
    except (OSError, ValueError, ImportError):
        return None


def _token_cache() -> Any:
    """determined.common.api._token_cache, loaded alone: the package's __init__ imports httpx (0.3 s)."""
    name = "determined.common.api._token_cache"
    if name in sys.modules:
        return sys.modules[name]
    import importlib.util

    import determined

    path = os.path.join(os.path.dirname(determined.__file__), "common", "api", "_token_cache.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _session_token(master: str, shell_id: str, user: Optional[str]) -> str:
    """The token of the full client: Session logs in again when the cached one is refused or missing (the blank
    password), or raises an error that says how to log in. It also checks that the shell exists."""
    from determined.common.api import Session

    session = Session(master, user=user)
    session.get(f"/tasks/{shell_id}")
    assert session.token is not None
    return session.token


def _get(master: str, path: str) -> bytes:
    import http.client

    parts = urllib.parse.urlsplit(master)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read(1 << 20)
        if answer.status != 200:
            raise ValueError(f"GET {path}: HTTP {answer.status}")
        return body
    finally:
        conn.close()


# ------------------------------------------------------------ the WebSocket


def _open(master: str, path: str, token: str) -> Tuple[socket.socket, BinaryIO]:
    """A WebSocket to `path` on the master, after its handshake: (the socket, a buffered reader of it)."""
    parts = urllib.parse.urlsplit(master)
    tls = parts.scheme == "https"
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if tls else 80)
    sock = socket.create_connection((host, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls:
        import ssl

        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    key = base64.b64encode(os.urandom(16))
    if "\r" in token or "\n" in token:
        raise ValueError("the cached token holds a line break")
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
                 % (path.encode(), parts.netloc.encode("idna"), key, token.encode()))
    reader = sock.makefile("rb", buffering=READ_SIZE)
    status_line = reader.readline(MAX_HEAD)
    parts_of_status = status_line.split(b" ", 2)
    if len(parts_of_status) < 2 or not parts_of_status[1].isdigit():
        raise ValueError("the master did not answer in HTTP")
    status = int(parts_of_status[1])
    headers = {}
    size = len(status_line)
    while True:
        line = reader.readline(MAX_HEAD)
        size += len(line)
        if line in (b"\r\n", b"\n", b"") or size > MAX_HEAD:
            break
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if status != 101:
        length = headers.get(b"content-length", b"0")
        body = reader.read(min(int(length) if length.isdigit() else 0, 4096))
        sock.close()
        raise Refused(status, body)
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    if headers.get(b"sec-websocket-accept") != accept:
        sock.close()
        raise ValueError("the master's WebSocket handshake does not match ours")
    sock.settimeout(None)
    return sock, reader  # type: ignore[return-value]


def _widen_pipe(fd: int) -> None:
    """ssh's pipe to us (or ours to it) holds up to PIPE_BYTES (Linux; 64 KiB by default): a busy machine then
    moves a copy in fewer, larger frames."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):  # not a pipe, not Linux, or over the system's pipe-max-size
        pass


def _mask() -> Any:
    try:
        from websockets.speedups import apply_mask
    except ImportError:  # a build of websockets without its C routines
        from websockets.utils import apply_mask
    return apply_mask


class _Stream:
    """stdin to binary frames, frames to stdout, until either side ends."""

    def __init__(self, sock: socket.socket, reader: BinaryIO) -> None:
        self.sock, self.reader = sock, reader
        self.tls = not type(sock) is socket.socket  # an SSL socket: no sendmsg
        self.lock = threading.Lock()
        self.apply_mask = _mask()
        self.closed = False

    def send(self, opcode: int, data: bytes) -> None:
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        key = os.urandom(4)
        masked = self.apply_mask(data, key)
        with self.lock:
            if self.tls:
                self.sock.sendall(head + key + masked)
                return
            sent = self.sock.sendmsg([head + key, masked])  # no copy of the payload into one buffer
            if sent < len(head) + 4 + len(masked):
                self.sock.sendall((head + key + masked)[sent:])

    def upstream(self) -> None:
        fd = sys.stdin.buffer.fileno()
        _widen_pipe(fd)
        try:
            while True:
                data = os.read(fd, READ_SIZE)
                if not data:
                    break
                self.send(0x2, data)
        except OSError:
            pass
        finally:
            self.close(1000)

    def close(self, code: int) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.send(0x8, struct.pack("!H", code))
        except OSError:
            pass

    def relay(self) -> int:
        threading.Thread(target=self.upstream, daemon=True).start()
        out = sys.stdout.buffer.fileno()
        _widen_pipe(out)
        read = self.reader.read
        try:
            while True:
                head = read(2)
                if len(head) < 2:
                    break
                opcode, length = head[0] & 0x0F, head[1] & 0x7F
                if length == 126:
                    length = struct.unpack("!H", read(2))[0]
                elif length == 127:
                    length = struct.unpack("!Q", read(8))[0]
                if length > MAX_FRAME:
                    break
                key = read(4) if head[1] & 0x80 else None
                data = read(length)
                if len(data) < length:
                    break
                if key is not None:
                    data = self.apply_mask(data, key)
                if opcode in (0x0, 0x1, 0x2):
                    view = memoryview(data)
                    while view:
                        view = view[os.write(out, view):]
                elif opcode == 0x8:
                    self.close(1000)
                    break
                elif opcode == 0x9:
                    self.send(0xA, data)
        except (OSError, struct.error):
            pass
        finally:
            self.sock.close()
        return 0


# ------------------------------------------------------------ behind an HTTP proxy


def _through_library(master: str, shell_id: str, user: Optional[str]) -> int:
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    token = _session_token(master, shell_id, user)
    url = master.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
    try:
        with connect(f"{url}/proxy/{shell_id}/", additional_headers={"Authorization": f"Bearer {token}"},
                     max_size=None, compression=None, open_timeout=30, ping_interval=None) as ws:
            def upstream() -> None:
                try:
                    while True:
                        data = os.read(sys.stdin.buffer.fileno(), READ_SIZE)
                        if not data:
                            break
                        ws.send(data)
                except (OSError, ConnectionClosed):
                    pass
                finally:
                    ws.close()

            threading.Thread(target=upstream, daemon=True).start()
            try:
                while True:
                    data = ws.recv()
                    sys.stdout.buffer.write(data if isinstance(data, bytes) else data.encode())
                    sys.stdout.buffer.flush()
            except (ConnectionClosed, BrokenPipeError):
                pass
            return 0
    except InvalidStatus as e:
        print(f"det tunnel: the master refused the connection to shell {shell_id} "
              f"(HTTP {e.response.status_code}): {e.response.body.decode(errors='replace')[:300]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
