"""Issue 33, finding 7: unauthenticated memory exhaustion of a served master.

Paths outside /api/ buffered up to 1 MiB of body before routing, and connections were not capped (600 took the
master from 439 MB to 920 MB). Now a body to a page or file is refused unread, a request without a token may send
at most 16 KiB, and a real `det master up` holds at most DET_MAX_CONNECTIONS connections, at most
DET_MAX_CONNECTIONS_PER_ADDRESS from one address; a connection past a cap is answered 503 and closed.
"""
import json
import pathlib
import socket
from typing import Iterator, List, Optional

import pytest

from determined.master.security import connection_limits

from tests.server._server import ServerProcess, server_db_url, wait_for

TOTAL, PER_ADDRESS = 10, 6
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: pathlib.Path = tmp_path_factory.mktemp("connections")
    env = {connection_limits.MAX_CONNECTIONS_ENV: str(TOTAL), connection_limits.MAX_PER_ADDRESS_ENV: str(PER_ADDRESS)}
    proc = ServerProcess(root / "data", db=server_db_url(), env=env).start()
    try:
        yield proc
    finally:
        proc.stop()


def _address(url: str) -> tuple:
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    return host, int(port)


def _connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.bind((source, 0))  # every 127.x.y.z is this machine: a distinct client address
    sock.connect(_address(url))
    return sock


def _ask(sock: socket.socket, head: str, body: bytes = b"") -> bytes:
    """Send a request (its body if given), read the answer's head and JSON body."""
    sock.sendall(head.encode() + body)
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        more = sock.recv(65536)
        if not more:
            break
        answer += more
    return answer


def _info(sock: socket.socket) -> bytes:
    return _ask(sock, "GET /api/v1/master/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")


def _answered(url: str, source: str) -> Optional[socket.socket]:
    """A connection from `source` whose request was answered 200, held open; None when it was refused."""
    sock = _connect(url, source)
    if _info(sock).startswith(b"HTTP/1.1 200"):
        # the head of a next request, unfinished: the connection stays busy (an idle one would be closed after
        # the keep-alive timeout, however slowly the test goes on)
        sock.sendall(b"GET /api/v1/master/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        return sock
    sock.close()
    return None


def _hold(url: str, source: str, count: int) -> List[socket.socket]:
    """`count` connections that each got an answer and stay open (kept alive). A connection an earlier request
    closed may still count until the master has seen it close: a refused one is tried again until then."""
    return [wait_for(lambda: _answered(url, source), 30, f"a connection from {source} under the caps")
            for _ in range(count)]


def _message(answer: bytes) -> str:
    return str(json.loads(answer.split(b"\r\n\r\n", 1)[1])["detail"]["message"])


def test_connections_past_the_caps_get_503_and_are_closed(capped_server: ServerProcess) -> None:
    url = capped_server.url
    held: List[socket.socket] = []
    try:
        held += _hold(url, "127.0.0.4", PER_ADDRESS)
        extra = _connect(url, "127.0.0.4")
        answer = _info(extra)
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer.lower(), answer[:300]
        assert "your address (127.0.0.4)" in _message(answer)
        assert extra.recv(1) == b""  # closed by the master
        extra.close()
        # another address may still connect, up to the total
        held += _hold(url, "127.0.0.5", TOTAL - PER_ADDRESS)
        third = _connect(url, "127.0.0.3")
        answer = _info(third)
        assert answer.startswith(b"HTTP/1.1 503") and f"most connections ({TOTAL})" in _message(answer)
        third.close()
    finally:
        for sock in held:
            sock.close()
    # once they are closed, the master answers again
    _hold(url, "127.0.0.3", 1)[0].close()


def test_a_body_to_a_page_is_refused_unread(capped_server: ServerProcess) -> None:
    url = capped_server.url
    for head in (f"POST /experiments/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {512 * 1024}\r\n\r\n",
                 f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {300 * MiB}\r\n\r\n",
                 "GET /static/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"):
        sock = _connect(url)
        try:
            answer = _ask(sock, head)  # only the head: the answer comes before any of the body is sent
        finally:
            sock.close()
        assert answer.startswith(b"HTTP/1.1 413") and "takes no request body" in _message(answer), answer[:300]
        assert b"connection: close" in answer.lower()
    # a page without a body is served as before
    sock = _connect(url)
    try:
        answer = _ask(sock, "GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


def test_a_request_without_a_token_sends_at_most_16_kib(capped_server: ServerProcess) -> None:
    sock = _connect(capped_server.url)
    try:
        answer = _ask(sock, f"GET /api/v1/master/info HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {MiB}\r\n\r\n")
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 413") and "16 KiB allowed for a request without a token" in _message(answer)
