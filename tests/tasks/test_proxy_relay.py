"""The proxy's HTTP/1.1 relay to a task server (determined/master/api/proxy_relay.py), against small servers of the
test's own on 127.0.0.1 that answer exactly what each case needs: framing, kept connections, and tasks that break."""
import asyncio
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import pytest

from determined.master.api import proxy, proxy_relay
from tests.tasks import _task_servers

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TASK = "0b6c5a2e-1111-4222-8333-944455556666"


async def _serve(handler: Handler) -> Tuple[asyncio.AbstractServer, int, Dict[str, Any]]:
    return await _task_servers.serve(handler)


async def _read_request(reader: asyncio.StreamReader) -> Tuple[bytes, Dict[bytes, bytes], bytes]:
    """(request line, headers, de-chunked body) of one request."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    body = b""
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    elif headers.get(b"transfer-encoding") == b"chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    return lines[0], headers, body


class Client:
    """One ASGI request as the proxy gets it: `receive` hands out `body` in pieces, `send` records the answer."""

    def __init__(self, body: Optional[List[bytes]] = None, disconnect: Optional[asyncio.Event] = None) -> None:
        self.pieces = list(body or [b""])
        self.sent: List[Dict[str, Any]] = []
        self.disconnect = disconnect

    async def receive(self) -> Dict[str, Any]:
        if self.pieces:
            piece = self.pieces.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(self.pieces)}
        if self.disconnect is not None:
            await self.disconnect.wait()
        else:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def complete(self) -> bool:
        return bool(self.sent) and self.sent[-1]["type"] == "http.response.body" \
            and not self.sent[-1].get("more_body", False)


def _keep_all(raw: List[Tuple[bytes, bytes]]) -> List[Tuple[bytes, bytes]]:
    return [(k, v) for k, v in raw if k not in (b"transfer-encoding", b"connection")]


async def _get(relay: proxy_relay.Relay, port: int, client: Optional[Client] = None, method: str = "GET",
               request_headers: Optional[List[Tuple[bytes, bytes]]] = None) -> Client:
    client = client or Client()
    await relay.relay(client.receive, client.send, port, method, b"/proxy/x/api?a=1", [(b"accept", b"*/*")],
                      request_headers or [], _keep_all, 1024)
    return client


def _run(case: Callable[[], Awaitable[None]]) -> None:
    """The case on an event loop of its own thread: the suite's Chromium (tests/ui, Playwright's sync API) keeps
    a loop running in the main thread of the worker it ran on."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, asyncio.wait_for(case(), 20)).result()


def test_a_chunked_answer_is_relayed_whole_and_the_connection_kept() -> None:
    async def case() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for n in range(2):
                line, headers, _ = await _read_request(reader)
                assert line == b"GET /proxy/x/api?a=1 HTTP/1.1" and headers[b"accept"] == b"*/*"
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                             b"5;ext=1\r\nhello\r\n7\r\n world!\r\n0\r\nX-Trailer: dropped\r\n\r\n")
                await writer.drain()

        server, port, seen = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            for _ in range(2):
                client = await _get(relay, port)
                assert client.status == 200 and client.body == b"hello world!" and client.complete
                assert (b"content-type", b"text/plain") in client.sent[0]["headers"]
                assert not any(k in (b"content-length", b"x-trailer") for k, _ in client.sent[0]["headers"])
            assert seen["connections"] == 1 and relay.opened == 1
    _run(case)


def test_a_streamed_upload_goes_chunked_and_a_sized_one_keeps_its_length() -> None:
    async def case() -> None:
        bodies: List[Tuple[Dict[bytes, bytes], bytes]] = []

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                _, headers, body = await _read_request(reader)
                bodies.append((headers, body))
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()

        server, port, _ = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            streamed = await _get(relay, port, Client([b"abc", b"", b"defg", b"h"]), "PUT",
                                  [(b"transfer-encoding", b"chunked")])
            sized = await _get(relay, port, Client([b"12345", b"67"]), "POST", [(b"content-length", b"7")])
            assert streamed.status == 201 and sized.status == 201 and sized.body == b"ok"
            (first, first_body), (second, second_body) = bodies
            assert first_body == b"abcdefgh" and first[b"transfer-encoding"] == b"chunked"
            assert b"content-length" not in first
            assert second_body == b"1234567" and second[b"content-length"] == b"7"
    _run(case)


def test_a_body_over_the_bound_is_refused_before_or_while_it_is_sent() -> None:
    async def case() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()

        server, port, seen = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            with pytest.raises(proxy_relay.BodyTooLarge):  # said so up front: no connection at all
                await _get(relay, port, Client([b"x"]), "POST", [(b"content-length", b"5000")])
            assert seen["connections"] == 0
            with pytest.raises(proxy_relay.BodyTooLarge):  # streamed past the bound
                await _get(relay, port, Client([b"x" * 600, b"y" * 600]), "POST",
                           [(b"transfer-encoding", b"chunked")])
            assert relay._take(port) is None  # the half-sent request's connection is not kept
    _run(case)


def test_a_kept_connection_is_reused_after_an_error_answer_and_replaced_once_the_task_closed_it() -> None:
    async def case() -> None:
        answers = [b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops",
                   b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for answer in answers:
                await _read_request(reader)
                writer.write(answer)
                await writer.drain()
            await _read_request(reader)  # then it closes as the next request arrives (its keep-alive ran out)

        server, port, seen = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            assert (await _get(relay, port)).status == 500
            assert (await _get(relay, port)).body == b"ok"
            assert seen["connections"] == 1
            third = await _get(relay, port)  # sent again, once, on a new connection
            assert third.status == 500 and third.body == b"oops" and seen["connections"] == 2
            await _get(relay, port)
            with pytest.raises(proxy_relay.UpstreamError):  # a body is not sent twice: the client gets a 502
                await _get(relay, port, Client([b"abc"]), "POST", [(b"content-length", b"3")])
    _run(case)


def test_a_task_that_closes_in_the_middle_of_its_answer_gets_the_client_a_502_not_a_hang() -> None:
    async def case() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
            await writer.drain()

        server, port, _ = await _serve(handler)
        async with server:
            middleware = proxy.TaskProxyMiddleware(app=None)
            client = Client()
            path = f"/proxy/{TASK}/x"
            scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
                     "headers": []}
            await middleware._relay_http(scope, client.receive, client.send, TASK, port, "secret", [])
            assert client.status == 502 and b"closed the connection in the middle" in client.body
            assert client.complete
    _run(case)


def test_a_long_answer_cut_short_ends_the_clients_answer_incomplete() -> None:
    async def case() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"10000\r\n" + b"z" * 70000)
            await writer.drain()

        server, port, _ = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            client = await _get(relay, port)
            assert client.status == 200 and not client.complete  # the ASGI server then closes the connection
            assert 0 < len(client.body) <= 70000 and relay._take(port) is None
    _run(case)


def test_head_1xx_and_an_answer_without_framing() -> None:
    async def case() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line, _, _ = await _read_request(reader)
            assert line.startswith(b"HEAD ")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n")  # HEAD: no body follows
            await writer.drain()
            await _read_request(reader)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil I close")
            await writer.drain()

        server, port, seen = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            head = await _get(relay, port, method="HEAD")
            assert head.status == 200 and head.body == b"" and head.complete
            assert (b"content-length", b"12345") in head.sent[0]["headers"]
            unframed = await _get(relay, port)
            assert unframed.status == 200 and unframed.body == b"until I close" and unframed.complete
            assert not any(k == b"link" for k, _ in unframed.sent[0]["headers"])
            assert seen["connections"] == 1 and relay._take(port) is None  # read to its close: not kept
    _run(case)


def test_hostile_answers_are_502_and_requests_cannot_inject_headers() -> None:
    async def case() -> None:
        hostile = [b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (proxy_relay.MAX_HEAD_BYTES + 10) + b"\r\n\r\n",
                   b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
                   b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                   b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
                   b"SSH-2.0-OpenSSH\r\n\r\n",
                   b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n"]

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(hostile.pop(0))
            await writer.drain()

        server, port, _ = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            for _ in range(len(hostile)):
                client = Client()
                try:
                    await _get(relay, port, client)
                except proxy_relay.UpstreamError:
                    continue
                # the chunked one has started streaming: it must end incomplete, never with a whole answer
                assert client.status == 200 and not client.complete
        for target, headers in ((b"/a b", []), (b"/a\r\nX: 1", []), (b"/ok", [(b"x-a", b"1\r\nInjected: yes")]),
                                (b"/ok", [(b"bad name", b"1")])):
            with pytest.raises(ValueError):
                proxy_relay.request_head("GET", target, headers)
        with pytest.raises(ValueError):
            proxy_relay.request_head("GET /x HTTP/1.1\r\n", b"/", [])
    _run(case)


def test_a_client_that_goes_away_stops_an_endless_answer() -> None:
    async def case() -> None:
        stopped = asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                while True:  # an event stream that never ends
                    writer.write(b"4\r\ntick\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.01)
            except ConnectionError:
                stopped.set()

        server, port, _ = await _serve(handler)
        async with server:
            relay = proxy_relay.Relay()
            gone = asyncio.Event()
            client = Client(disconnect=gone)
            relaying = asyncio.ensure_future(_get(relay, port, client))
            while len(client.body) < 8:
                await asyncio.sleep(0.01)
            gone.set()
            await relaying  # returns, not cancelled
            await stopped.wait()
            assert not client.complete
    _run(case)


def test_the_shell_tunnel_carries_a_stream_both_ways_answers_pings_and_reports_a_refusal(tmp_path: Any) -> None:
    """determined.cli.tunnel (ssh's ProxyCommand) against a WebSocket server standing in for the master's proxy:
    its own small WebSocket client must mask its frames (the server refuses unmasked ones), answer a ping, and
    carry every byte both ways; a refused connection is reported with its status."""
    import http
    import json
    import os
    import subprocess
    import sys
    import threading

    from websockets.asyncio.server import serve

    from determined.common.api import _token_cache

    pongs: List[bool] = []
    ready = threading.Event()
    state: Dict[str, Any] = {}

    async def process_request(connection: Any, request: Any) -> Any:
        if request.path == "/api/v1/master/info":
            return connection.respond(http.HTTPStatus.OK, json.dumps({"version": "x"}))
        if request.headers.get("Authorization") != "Bearer the-token" or request.path != "/proxy/shell-1/":
            return connection.respond(http.HTTPStatus.FORBIDDEN, "task shell-1 is alice's\n")
        return None

    async def echo(ws: Any) -> None:
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 10)
        pongs.append(True)
        async for message in ws:  # back, as binary frames of other sizes
            for start in range(0, len(message), 70000):
                await ws.send(message[start:start + 70000])

    async def run() -> None:
        async with serve(echo, "127.0.0.1", 0, process_request=process_request, max_size=None,
                         compression=None) as server:
            state["port"] = server.sockets[0].getsockname()[1]
            state["stop"] = asyncio.get_running_loop().create_future()
            ready.set()
            await state["stop"]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        url = f"http://127.0.0.1:{state['port']}"
        env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
        os.environ["XDG_CONFIG_HOME"], saved = env["XDG_CONFIG_HOME"], os.environ.get("XDG_CONFIG_HOME")
        try:
            _token_cache.store_token(url, "alice", "the-token", None, make_default=True)
        finally:
            if saved is None:
                del os.environ["XDG_CONFIG_HOME"]
            else:
                os.environ["XDG_CONFIG_HOME"] = saved
        data = os.urandom(600_000)
        tunnel = subprocess.Popen([sys.executable, "-m", "determined.cli.tunnel", url, "shell-1", "--user", "alice"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert tunnel.stdin is not None and tunnel.stdout is not None
            writer = threading.Thread(target=tunnel.stdin.write, args=(data,), daemon=True)
            writer.start()
            back = b""
            while len(back) < len(data):  # every byte back before stdin ends (its end closes the WebSocket)
                piece = tunnel.stdout.read1(1 << 16)
                assert piece, tunnel.stderr.read() if tunnel.stderr else ""
                back += piece
            writer.join(10)
            tunnel.stdin.close()
            assert tunnel.wait(30) == 0
        finally:
            if tunnel.poll() is None:
                tunnel.kill()
                tunnel.wait()
        assert back == data and pongs == [True]
        refused = subprocess.run([sys.executable, "-m", "determined.cli.tunnel", url, "shell-2", "--user", "alice"],
                                 input=b"", capture_output=True, timeout=60, env=env)
        assert refused.returncode == 1 and b"HTTP 403" in refused.stderr and b"alice's" in refused.stderr
    finally:
        loop.call_soon_threadsafe(state["stop"].set_result, None)
        thread.join(10)
