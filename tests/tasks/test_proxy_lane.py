"""The proxy's fast lane (determined/master/api/proxy_lane.py): a real uvicorn server with the lane in front of its
capped h11 protocol, task servers of the test's own on 127.0.0.1, raw sockets as clients where the bytes matter.
What the lane does not take must reach the ASGI app untouched; what it takes must come back as the ASGI path would
answer it."""
import asyncio
import re
import socket
import threading
import types
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import httpx
import pytest
import uvicorn

from determined.master.api import proxy_lane, proxy_relay
from determined.master.security import connection_limits
from tests.tasks import _task_servers

TASK = "0b6c5a2e-1111-4222-8333-944455556666"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class FakeGate:
    """api/proxy.py's Gate as the lane uses it: alice may, bob may not, nobody else is known."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.decided = 0
        self.activity = 0
        self.secret = "task-secret"

    def cached_until(self, key: Optional[str], task_id: str) -> Any:
        return None  # every request is decided (in a thread), as a first one is

    def running(self, task_id: str) -> bool:
        return True

    def remember(self, key: Optional[str], decision: Any) -> None:
        return None

    def note_activity(self, task_id: str) -> None:
        self.activity += 1

    def decide(self, task_id: str, headers: List[Tuple[bytes, bytes]], code: Optional[str]) -> Any:
        self.decided += 1
        token = dict(headers).get(b"authorization", b"")
        if token == b"Bearer alice":
            return 200, "", None, (self.port, self.secret, "NOTEBOOK")
        if token == b"Bearer alice-tb":
            return 200, "", None, (self.port, self.secret, "TENSORBOARD")
        if token == b"Bearer alice-shell":
            return 200, "", None, (self.port, None, "SHELL")
        if token == b"Bearer bob":
            return 403, f"task {task_id} is 'alice''s", None, None
        return 401, "log in first", None, None


class Lane:
    """A uvicorn server on 127.0.0.1 with the lane in front; its ASGI app answers `asgi <path>`."""

    def __init__(self, task_port: int) -> None:
        self.gate = FakeGate(task_port)
        self.asgi_paths: List[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "websocket":  # refused, as api/proxy.py refuses one (uvicorn answers 403)
                self.asgi_paths.append(scope["path"])
                await receive()
                await send({"type": "websocket.close", "code": 1008})
                return
            assert scope["type"] == "http"
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            self.asgi_paths.append(scope["path"])
            text = b"asgi " + scope["path"].encode() + b" " + body
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(text)).encode())]})
            await send({"type": "http.response.body", "body": text})

        app.state = types.SimpleNamespace(proxy_gate=self.gate,  # type: ignore[attr-defined]
                                          allowed_hosts=frozenset({"127.0.0.1", "localhost"}))
        self.protocol = proxy_lane.front_protocol(connection_limits.capped_protocol(64, 64), (64, 64))
        self.config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                     http=self.protocol, timeout_keep_alive=5)
        self.server = uvicorn.Server(self.config)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.task: Optional["asyncio.Task[None]"] = None

    async def __aenter__(self) -> "Lane":
        self.task = asyncio.ensure_future(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)

    @property
    def opened(self) -> int:
        return self.protocol.pool.opened  # type: ignore[attr-defined, no-any-return]


_task_server = _task_servers.serve


async def _read_request(reader: asyncio.StreamReader) -> Tuple[bytes, Dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return lines[0], headers, body


def _answering(seen: Dict[str, Any], answers: Dict[bytes, Callable[[bytes], bytes]]) -> Handler:
    """A task server answering each request by its path (the default: 200 with the request's body echoed)."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, headers, body = await _read_request(reader)
            seen["requests"].append((line, headers, body))
            path = line.split(b" ")[1]
            make = answers.get(path.split(b"?")[0].rsplit(b"/", 1)[-1])
            if make is None:
                writer.write(b"HTTP/1.1 200 OK\r\nServer: tornado\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body) + 4, b"got " + body))
            else:
                out = make(body)
                if not out:
                    return
                writer.write(out)
            await writer.drain()
    return handler


async def _raw(port: int, data: bytes, until: Callable[[bytes], bool], timeout: float = 10) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = b""
    try:
        while not until(got):
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                break
            got += chunk
    finally:
        writer.close()
    return got


def _get(path: str, token: str = "alice", extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}{extra}\r\n".encode()


def run(coro: Awaitable[None]) -> None:
    """The test's coroutine on an event loop of its own, in a thread: the worker's main thread may hold a running
    loop already (Playwright's sync API, once a tests/ui module ran in this xdist worker)."""
    failure: List[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]
        except BaseException as e:  # handed to the test's thread
            failure.append(e)
    thread = threading.Thread(target=target, name="lane-test")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def test_a_plain_request_is_relayed_by_the_lane_with_the_proxys_headers_over_one_kept_connection() -> None:
    async def main() -> None:
        seen: Dict[str, Any] = {"connections": 0, "requests": []}
        server, port, _ = await _task_server(_answering(seen, {}), seen)
        async with Lane(port) as lane:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}") as client:
                for i in range(3):
                    r = await client.post(f"/proxy/{TASK}/api/x?n={i}", content=b"hello %d" % i,
                                          headers={"Authorization": "Bearer alice", "Cookie": "a=1; det_proxy_x=2"})
                    assert r.status_code == 200 and r.content == b"got hello %d" % i
                    assert r.headers["x-frame-options"] == "DENY" and "content-security-policy" in r.headers
                    assert r.headers["server"] != "tornado" and "date" in r.headers
            assert lane.asgi_paths == []  # the ASGI app never saw them
            assert lane.opened == 1 and seen["connections"] == 1  # one kept connection to the task
            line, headers, body = seen["requests"][2]
            assert line == f"POST /proxy/{TASK}/api/x?n=2 HTTP/1.1".encode() and body == b"hello 2"
            assert headers[b"authorization"] == b"token task-secret"  # the task's secret, not the master's token
            assert headers[b"cookie"] == b"a=1" and headers[b"host"] == f"127.0.0.1:{port}".encode()
            assert lane.gate.activity == 0  # a notebook's use is read from Jupyter, not from the proxy
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}") as client:
                for i in range(2):
                    r = await client.get(f"/proxy/{TASK}/", headers={"Authorization": "Bearer alice-tb"})
                    assert r.status_code == 200
            assert lane.gate.activity == 2  # a TensorBoard's is
        server.close()
    run(main())


def test_what_the_lane_does_not_take_reaches_the_asgi_app_untouched_and_the_connection_stays_there() -> None:
    async def main() -> None:
        seen: Dict[str, Any] = {"connections": 0, "requests": []}
        server, port, _ = await _task_server(_answering(seen, {}), seen)
        async with Lane(port) as lane:
            # a proxied request, then one for the API on the same connection: the second and what follows go to ASGI
            got = await _raw(lane.port, _get(f"/proxy/{TASK}/a") + _get("/api/v1/me") + _get(f"/proxy/{TASK}/b"),
                             lambda b: b.count(b"HTTP/1.1 200") == 3)
            assert got.count(b"HTTP/1.1 200") == 3 and b"got " in got
            assert lane.asgi_paths == ["/api/v1/me", f"/proxy/{TASK}/b"]
            lane.asgi_paths.clear()
            close = "Connection: close\r\n"
            cases = [
                _get(f"/proxy/{TASK}/a", extra=close + "Transfer-Encoding: chunked\r\n")[:-2]
                + b"\r\n3\r\nabc\r\n0\r\n\r\n",
                _get(f"/proxy/{TASK}/a", extra=close).replace(b"HTTP/1.1", b"HTTP/1.0"),
                _get(f"/proxy/{TASK}/a", extra=close).replace(b"Host: 127.0.0.1", b"Host: evil.example"),
                _get(f"/proxy/{TASK}/a?det_open=code", extra=close),
                _get(f"/proxy/%30{TASK[1:]}/a", extra=close),
                _get(f"/proxy/{TASK}", extra=close),
                f"POST /proxy/{TASK}/a HTTP/1.1\r\nHost: 127.0.0.1\r\n{close}Content-Length: "
                f"{proxy_lane.LANE_BODY_MAX + 1}\r\n\r\n".encode() + b"x" * (proxy_lane.LANE_BODY_MAX + 1),
            ]
            for data in cases:
                got = await _raw(lane.port, data, lambda b: False)  # until the server closes
                assert got.startswith(b"HTTP/1.1 200") and b"asgi /" in got, (data[:80], got[:200])
                assert b"x-frame-options" not in got  # not the lane's answer
            assert len(lane.asgi_paths) == len(cases)
            # an upgrade goes to uvicorn's WebSocket protocol (which wants its key)
            got = await _raw(lane.port, _get(f"/proxy/{TASK}/a", extra="Connection: Upgrade\r\nUpgrade: websocket\r\n"),
                             lambda b: False)
            assert b"Sec-WebSocket-Key" in got
            assert seen["requests"][1:] == []  # only the first request reached the task
        server.close()
    run(main())


def test_pipelined_requests_refusals_and_a_body_answer_in_order() -> None:
    async def main() -> None:
        seen: Dict[str, Any] = {"connections": 0, "requests": []}
        server, port, _ = await _task_server(_answering(seen, {}), seen)
        async with Lane(port) as lane:
            body = b"y" * 1000
            data = (_get(f"/proxy/{TASK}/1") + _get(f"/proxy/{TASK}/2", token="bob") + _get(f"/proxy/{TASK}/3", "")
                    + f"PUT /proxy/{TASK}/4 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer alice\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            got = await _raw(lane.port, data, lambda b: b.endswith(b"got " + body))
            statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", got)
            assert statuses == [b"200", b"403", b"401", b"200"]
            assert b"www-authenticate: Bearer" in got and b"alice''s" in got
            assert got.count(b"x-content-type-options: nosniff") == 4
            assert lane.asgi_paths == [] and len(seen["requests"]) == 2
        server.close()
    run(main())


def _chunked(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"5;ext=1\r\n" + body[:5] + b"\r\n"
            + b"%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\nTrailer: x\r\n\r\n")


def test_chunked_unframed_streamed_and_headless_answers() -> None:
    big = bytes(range(256)) * 8192  # 2 MiB: streamed, not buffered
    answers = {
        b"chunked": lambda _: _chunked(b"0123456789abcdef"),
        b"big": lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big,
        b"unframed": lambda _: b"HTTP/1.1 200 OK\r\n\r\nuntil the task closes",
        b"early": lambda _: b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"redirect-in": lambda _: f"HTTP/1.1 302 Found\r\nLocation: /proxy/{TASK}/lab\r\nContent-Length: 0\r\n\r\n"
        .encode(),
        b"redirect-out": lambda _: b"HTTP/1.1 302 Found\r\nLocation: /api/v1/users\r\nContent-Length: 0\r\n\r\n",
        b"broken": lambda _: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part",
        b"garbage": lambda _: b"SSH-2.0-OpenSSH\r\n\r\n",
    }
    closing = {b"unframed", b"broken", b"garbage"}

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line, _, _ = await _read_request(reader)
            name = line.split(b" ")[1].rsplit(b"/", 1)[-1]
            writer.write(answers[name](b""))
            await writer.drain()
            if name in closing:
                return

    async def main() -> None:
        server, port, seen = await _task_server(handler)
        async with Lane(port) as lane:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}",
                                         headers={"Authorization": "Bearer alice"}) as client:
                r = await client.get(f"/proxy/{TASK}/chunked")
                assert r.content == b"0123456789abcdef" and r.headers["transfer-encoding"] == "chunked"
                r = await client.get(f"/proxy/{TASK}/big")
                assert r.content == big
                r = await client.get(f"/proxy/{TASK}/unframed")
                assert r.content == b"until the task closes" and r.headers["transfer-encoding"] == "chunked"
                r = await client.get(f"/proxy/{TASK}/early")
                assert r.status_code == 204 and r.content == b""
                r = await client.head(f"/proxy/{TASK}/big")
                assert r.status_code == 200 and r.headers["content-length"] == str(len(big)) and r.content == b""
                r = await client.get(f"/proxy/{TASK}/redirect-in")
                assert r.status_code == 302 and r.headers["location"] == f"/proxy/{TASK}/lab"
                r = await client.get(f"/proxy/{TASK}/redirect-out")
                assert r.status_code == 502 and "redirected outside" in r.text
                r = await client.get(f"/proxy/{TASK}/broken")
                assert r.status_code == 502 and "in the middle of its answer" in r.text
                r = await client.get(f"/proxy/{TASK}/garbage")
                assert r.status_code == 502 and "not HTTP/1.x" in r.text
                r = await client.get(f"/proxy/{TASK}/chunked")  # the client's connection is still good
                assert r.content == b"0123456789abcdef"
            assert lane.asgi_paths == []
        server.close()
    run(main())


def test_a_long_answer_cut_short_ends_the_clients_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"z" * 200_000)
        await writer.drain()

    async def main() -> None:
        server, port, _ = await _task_server(handler)
        async with Lane(port) as lane:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}") as client:
                with pytest.raises(httpx.RemoteProtocolError):
                    await client.get(f"/proxy/{TASK}/cut", headers={"Authorization": "Bearer alice"})
        server.close()
    run(main())


def test_a_client_that_does_not_read_holds_the_task_back_and_one_that_leaves_frees_its_connection() -> None:
    sent = {"bytes": 0}
    done: Dict[str, Any] = {}

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"%x\r\n%s\r\n" % (65536, b"w" * 65536)
        try:
            while sent["bytes"] < 256 * 2**20:
                writer.write(piece)
                await writer.drain()
                sent["bytes"] += 65536
        except ConnectionError:
            pass
        finally:
            done["ended"].set()

    async def main() -> None:
        done["ended"] = asyncio.Event()
        server, port, _ = await _task_server(handler)
        async with Lane(port) as lane:
            reader, writer = await asyncio.open_connection("127.0.0.1", lane.port)
            writer.write(_get(f"/proxy/{TASK}/endless"))
            first = await reader.read(4096)
            assert first.startswith(b"HTTP/1.1 200")
            await asyncio.sleep(1.0)  # the client reads nothing more
            held = sent["bytes"]
            assert held < 64 * 2**20, f"the task sent {held} bytes to a client that read none"
            writer.close()  # the client goes away: the task's connection is closed too
            await asyncio.wait_for(done["ended"].wait(), 10)
            assert sent["bytes"] < 128 * 2**20
            assert lane.asgi_paths == []
        server.close()
    run(main())


def test_a_kept_connection_the_task_closed_is_replaced_once_and_a_dead_task_is_a_502() -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()  # then closes: the kept connection is dead at the next request

    async def main() -> None:
        server, port, seen = await _task_server(once)
        async with Lane(port) as lane:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}",
                                         headers={"Authorization": "Bearer alice"}) as client:
                for _ in range(3):
                    r = await client.get(f"/proxy/{TASK}/x")
                    assert r.status_code == 200 and r.text == "ok"
                assert seen["connections"] == 3
                server.close()
                await server.wait_closed()
                r = await client.get(f"/proxy/{TASK}/x")
                assert r.status_code == 502 and "did not answer" in r.text
    run(main())


def test_the_server_shuts_down_with_an_idle_lane_connection_open() -> None:
    async def main() -> None:
        server, port, _ = await _task_server(_answering({"connections": 0, "requests": []}, {}))
        lane = Lane(port)
        await lane.__aenter__()
        reader, writer = await asyncio.open_connection("127.0.0.1", lane.port)
        writer.write(_get(f"/proxy/{TASK}/x"))
        assert (await reader.read(4096)).startswith(b"HTTP/1.1 200")
        await lane.__aexit__()  # within 10 s: the idle connection is closed, not waited for
        assert await asyncio.wait_for(reader.read(), 5) == b""
        server.close()
    run(main())


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64])
def test_the_dechunker_gives_the_same_body_however_the_bytes_arrive(step: int) -> None:
    body = bytes(range(200)) * 3
    wire = _chunked(body)[len(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"):]
    d = proxy_lane.Dechunker()
    out = b""
    for i in range(0, len(wire), step):
        out += d.feed(wire[i:i + step])
    assert d.done and not d.extra
    decoded, rest = b"", out
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n"
            break
        decoded, rest = decoded + rest[:size], rest[size + 2:]
    assert decoded == body
    for bad in (b"zz\r\n", b"5\r\nabcdeXX", b"1" * 5000):
        with pytest.raises(proxy_relay.UpstreamError):
            proxy_lane.Dechunker().feed(bad)


def test_a_connection_repeating_a_request_is_answered_from_what_the_lane_learnt_and_nothing_stale_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A client repeating a request (a UI's polls) and a task answering with a head it sent before but for its
    Date: the lane parses each once per connection (the benchmark's case), yet every answer is the task's own, with
    the master's Date; a new secret of the task reaches it although the request's bytes did not change; what a
    connection learns is bounded; a refused redirect stays refused; 1xx heads are not taken for the answer."""
    parsed: List[bytes] = []
    real_parse = proxy_lane.parse_request

    def counting(head: bytes, host_allowed: Callable[[Optional[bytes]], bool]) -> Any:
        parsed.append(head)
        return real_parse(head, host_allowed)
    monkeypatch.setattr(proxy_lane, "parse_request", counting)
    answered = {"n": 0}

    def numbered(_: bytes) -> bytes:
        answered["n"] += 1
        n = answered["n"]
        return (b"HTTP/1.1 200 OK\r\nServer: tornado\r\nDate: Mon, 0%d Jan 2024 00:00:00 GMT\r\n"
                b"Content-Length: %d\r\n\r\nanswer %d" % (n % 9 + 1, len(b"answer %d" % n), n))

    def distinct(_: bytes) -> bytes:
        answered["n"] += 1
        return b"HTTP/1.1 200 OK\r\nX-N: %d\r\nContent-Length: 2\r\n\r\nok" % answered["n"]
    answers = {
        b"poll": numbered, b"distinct": distinct,
        b"out": lambda _: b"HTTP/1.1 302 Found\r\nDate: x\r\nLocation: /api/v1/users\r\nContent-Length: 0\r\n\r\n",
        b"early": lambda _: (b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                             b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"),
    }

    async def main() -> None:
        seen: Dict[str, Any] = {"connections": 0, "requests": []}
        server, port, _ = await _task_server(_answering(seen, answers), seen)
        async with Lane(port) as lane:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{lane.port}",
                                         headers={"Authorization": "Bearer alice"}) as client:
                for i in range(1, 6):
                    if i == 4:
                        lane.gate.secret = "new-secret"  # decided anew (the fake caches nothing)
                    r = await client.get(f"/proxy/{TASK}/poll")
                    assert r.status_code == 200 and r.text == f"answer {i}"  # not an earlier answer's body
                    assert "2024" not in r.headers["date"] and r.headers["x-frame-options"] == "DENY"
                    assert seen["requests"][-1][1][b"authorization"] == (
                        b"token new-secret" if i >= 4 else b"token task-secret")
                assert len(parsed) == 1  # one parse for five identical requests
                for _ in range(2):
                    r = await client.get(f"/proxy/{TASK}/out")
                    assert r.status_code == 502 and "redirected outside" in r.text
                    r = await client.get(f"/proxy/{TASK}/early")
                    assert r.status_code == 200 and r.text == "final"
                for _ in range(proxy_lane.MAX_KNOWN_ANSWERS + 8):
                    r = await client.get(f"/proxy/{TASK}/distinct")
                    assert r.status_code == 200 and r.headers["x-n"] == str(answered["n"])
            (conn,) = [c for conns in lane.protocol.pool.idle.values() for c in conns]  # type: ignore[attr-defined]
            assert 0 < len(conn.answers) <= proxy_lane.MAX_KNOWN_ANSWERS
            assert lane.opened == 3  # the connection of each refused answer is not kept
        server.close()
    run(main())


def test_parse_request_takes_only_plain_requests() -> None:
    def allowed(host: Optional[bytes]) -> bool:
        return host == b"ok"
    ok = f"GET /proxy/{TASK}/x HTTP/1.1\r\nHost: ok\r\nX-A:  b \r\nContent-Length: 3".encode()
    request = proxy_lane.parse_request(ok, allowed)
    assert request is not None and request.task_id == TASK and request.length == 3
    without = proxy_lane.parse_request(ok.replace(b"\r\nContent-Length: 3", b""), allowed)
    assert without is not None and without.length == -1
    assert (b"x-a", b"b") in request.headers
    for bad in [ok.replace(b"Host: ok", b"Host: no"), ok + b"\r\nHost: ok", ok + b"\r\nContent-Length: 3",
                ok.replace(b"3", b"-3"), ok.replace(b"3", b"9" * 40), ok + b"\r\n folded", ok + b"\r\nX\x01: 1",
                ok + b"\r\nExpect: 100-continue", ok.replace(b"GET", b"G(T"), ok.replace(b"/x", b""),
                ok + b"\r\nX-B: a\x00b", ok.replace(b"/x", b"/x\x01"), ok.replace(b"/x", b"/x\x7f")]:
        assert proxy_lane.parse_request(bad, allowed) is None, bad


def test_a_shells_websocket_is_joined_to_its_ssh_server_by_the_lane() -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    got: Dict[str, Any] = {"eof": asyncio.Event}

    async def ssh(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.setdefault("writers", []).append(writer)
        writer.write(b"SSH-2.0-test\r\n")  # a server speaks first
        while True:
            data = await reader.read(65536)
            if not data:
                got["eof"].set()
                return
            writer.write(data.upper())
            await writer.drain()

    async def main() -> None:
        got["eof"] = asyncio.Event()
        server, port, _ = await _task_server(ssh)
        async with Lane(port) as lane:
            url = f"ws://127.0.0.1:{lane.port}/proxy/{TASK}/"
            async with connect(url, additional_headers={"Authorization": "Bearer alice-shell"}, compression=None,
                               max_size=None) as ws:
                assert await ws.recv() == b"SSH-2.0-test\r\n"
                sent = bytes(range(97, 123)) * 40330  # ~1 MB in frames of 256 KiB: unmasked across reads
                for i in range(0, len(sent), 1 << 18):
                    await ws.send(sent[i:i + (1 << 18)])
                back = b""
                while len(back) < len(sent):
                    back += await ws.recv()
                assert back == sent.upper()
                await asyncio.wait_for(await ws.ping(b"p"), 5)  # answered by the lane
            await asyncio.wait_for(got["eof"].wait(), 5)  # the close reached the SSH server as its end
            assert lane.asgi_paths == []
            for token in ("bob", "alice"):  # refused, or a notebook's WebSocket: the ASGI path's
                with pytest.raises(InvalidStatus):
                    async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}):
                        pass
            assert lane.asgi_paths == [f"/proxy/{TASK}/"] * 2
            assert ws.close_code == 1000
            # an unmasked frame from a client is a protocol error (1002), and so is a reserved opcode
            for bad in (b"\x82\x03abc", b"\x83\x80\x00\x00\x00\x00"):
                reader, writer = await asyncio.open_connection("127.0.0.1", lane.port)
                writer.write(_get(f"/proxy/{TASK}/", token="alice-shell", extra=(
                    "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")))
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 101") and b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
                writer.write(bad)
                rest = await asyncio.wait_for(reader.read(), 5)
                assert rest.endswith(b"\x88\x02\x03\xea")  # the close frame, code 1002
                writer.close()
            with pytest.raises(ConnectionClosed):
                async with connect(url, additional_headers={"Authorization": "Bearer alice-shell"}) as ws:
                    assert await ws.recv() == b"SSH-2.0-test\r\n"
                    got["writers"][-1].close()  # the SSH server ends the connection: so does the stream
                    await asyncio.wait_for(ws.recv(), 5)
        server.close()
    run(main())
