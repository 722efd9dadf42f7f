"""The pure parts of the server's guards: JSON depth, the Host allow-list, the login back-off, the hash pool and the
bounds on model archives."""
import asyncio
import base64
import concurrent.futures
import io
import json
import random
import socket
import tarfile
import threading
from typing import Any, List

import pytest

from determined.master.security import login_throttle, request_limits, web_security
from determined.master.lifecycle import model_def
from determined.master.security.login_throttle import HashPool, LoginThrottle, TooManyLogins
from determined.master.problems import RequestProblem


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def random_json(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, 2.5, None, True, "plain", 'quote " and \\\\ back', "[{ in a string }]", "\\\\[", "é"])
    if rng.random() < 0.5:
        return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "b]", "{c", '"d"']) + str(i): random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_json_depth_matches_a_parser_on_random_documents() -> None:
    rng = random.Random(7)
    for _ in range(400):
        value = random_json(rng, rng.randint(0, 9))
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        depth = depth_of(value)
        for limit in (max(depth - 1, 0), depth, depth + 1):
            assert request_limits.json_depth_exceeds(text, limit) == (depth > limit), (text, limit)


def test_json_depth_of_hostile_text() -> None:
    limit = request_limits.MAX_JSON_DEPTH
    assert request_limits.json_depth_exceeds(b"[" * 100_000 + b"]" * 100_000)
    assert request_limits.json_depth_exceeds(b"[" * 100_000)  # never closed: still too deep
    assert not request_limits.json_depth_exceeds(b"[" * limit + b"]" * limit)
    assert request_limits.json_depth_exceeds(b"[" * (limit + 1) + b"]" * (limit + 1))
    assert not request_limits.json_depth_exceeds(json.dumps({"s": "[" * 1000}).encode())
    wide = json.dumps([[i] for i in range(20_000)]).encode()  # many brackets, shallow
    assert not request_limits.json_depth_exceeds(wide)
    body = json.dumps({"config": {"data": {"rows": [[[{"x": [1]}]]]}}}).encode()
    assert request_limits.too_deep_path(body, 4) == "config.data.rows[0]…"


def test_a_message_quotes_little_of_the_input() -> None:
    assert request_limits.clip("x" * 10, 20) == "x" * 10
    assert request_limits.clip("x" * 1000, 20) == "x" * 20 + "… (980 more characters)"
    assert len(request_limits.clip_repr("y" * 10**6)) < 400
    message, problems = request_limits.bounded_detail("m" * 10**6, ["p" * 10**6] * 1000)
    assert len(message) < 2100 and len(problems) == request_limits.MAX_ERROR_PROBLEMS + 1
    assert problems[-1] == f"… and {1000 - request_limits.MAX_ERROR_PROBLEMS} more problems"


def test_host_allow_list() -> None:
    loopback = web_security.allowed_hosts("127.0.0.1", ["det.example.com"])
    assert {"localhost", "127.0.0.1", "::1", "det.example.com"} <= loopback
    check = web_security.HostAllowListMiddleware(None, list(loopback))
    for ok in (b"localhost:8080", b"LOCALHOST", b"127.0.0.1:1", b"[::1]:8080", b"det.example.com.", b"10.1.2.3:80",
               b"[fe80::1]"):
        assert check.allows(ok), ok
    for bad in (b"evil.example", b"localhost.evil.example", b"det.example.com.evil", b"", None, b"a b", b"[::1",
                b"user@localhost", b"localhost:port", b"0x7f.1"):
        assert not check.allows(bad), bad
    assert web_security.HostAllowListMiddleware(None, ["*"]).allows(b"anything.example")
    wildcard = web_security.allowed_hosts("0.0.0.0")
    assert "localhost" in wildcard and socket.gethostname().lower() in wildcard
    assert "10.0.0.5" in web_security.allowed_hosts("10.0.0.5") and "::1" not in web_security.allowed_hosts("10.0.0.5")
    assert web_security.check_allowed_hosts_setting("det.example.com") == ["det.example.com"]
    with pytest.raises(ValueError, match="not a host name"):
        web_security.check_allowed_hosts_setting(["https://det.example.com/"])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fails(throttle: LoginThrottle, user: str, address: str, times: int) -> None:
    for _ in range(times):
        throttle.begin(user, address)
        throttle.failed(user, address)


def test_back_off_doubles_per_failure_up_to_its_cap_and_a_success_clears_it() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock)
    fails(throttle, "alice", "10.0.0.1", login_throttle.USER_FREE_FAILURES)
    waits: List[int] = []
    for _ in range(9):
        with pytest.raises(TooManyLogins) as info:
            throttle.begin("Alice", "10.0.0.2")  # names are case-insensitive; another address does not help
        waits.append(info.value.retry_after)
        clock.now += info.value.retry_after
        fails(throttle, "alice", "10.0.0.2", 1)
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    clock.now += 60
    throttle.begin("alice", "10.0.0.3")
    throttle.succeeded("alice", "10.0.0.3")
    throttle.begin("alice", "10.0.0.3")  # cleared
    clock.now += login_throttle.FORGET_AFTER + 1
    fails(throttle, "bob", "10.0.0.4", login_throttle.USER_FREE_FAILURES)
    clock.now += login_throttle.FORGET_AFTER + 1
    throttle.begin("bob", "10.0.0.4")  # forgotten after a quiet hour


def test_an_address_waits_after_many_names_and_ipv6_counts_by_its_network() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(login_throttle.ADDRESS_FREE_FAILURES):
        fails(throttle, f"user-{i}", "2001:db8::1", 1)
    with pytest.raises(TooManyLogins, match="your address"):
        throttle.begin("someone-else", "2001:db8::ffff")  # the same /64
    throttle.begin("someone-else", "2001:db8:0:1::1")
    # tries that run at once count before they end: the sixth of one name waits
    for _ in range(login_throttle.USER_FREE_FAILURES):
        throttle.begin("carol", "192.0.2.1")
    with pytest.raises(TooManyLogins):
        throttle.begin("carol", "192.0.2.1")


def test_the_hash_pool_runs_off_the_loop_and_refuses_a_flood() -> None:
    pool = HashPool(workers=1, max_waiting=2)
    release = threading.Event()

    async def scenario() -> List[Any]:
        loop_thread = threading.get_ident()
        first = asyncio.ensure_future(pool.run(lambda: (release.wait(10), threading.get_ident())[1]))
        second = asyncio.ensure_future(pool.run(lambda: "second"))
        await asyncio.sleep(0.05)
        with pytest.raises(TooManyLogins, match="too many logins at once"):
            await pool.run(lambda: "third")
        release.set()
        ran_on = await first
        assert ran_on != loop_thread
        return [await second, await pool.run(lambda: "after")]

    # A loop of its own in a thread of its own: the thread running the tests may hold a running loop already
    # (Playwright's sync API keeps one while a browser fixture of another module is open on this worker)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as runner:
            assert runner.submit(asyncio.run, scenario()).result(timeout=60) == ["second", "after"]
    finally:
        pool.shutdown()


def _archive(*members: "tarfile.TarInfo", fmt: int = tarfile.GNU_FORMAT) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt) as tar:
        entry = tarfile.TarInfo("model.py")
        source = b"class T:\n    pass\n"  # the entrypoint model:T resolves (lifecycle/model_def.py reads it)
        entry.size = len(source)
        tar.addfile(entry, io.BytesIO(source))
        for member in members:
            tar.addfile(member, io.BytesIO(b""))
    return base64.b64encode(buf.getvalue()).decode()


def test_archive_headers_and_names_are_bounded_before_anything_is_unpacked() -> None:
    long_name = tarfile.TarInfo("a" * (1024 * 1024))  # a GNU long name, read whole by tarfile
    pax = tarfile.TarInfo("p" * 300)
    pax.pax_headers = {"comment": "c" * (1024 * 1024)}  # a pax header, read whole by tarfile
    deep = tarfile.TarInfo("/".join(["d"] * 300))
    link = tarfile.TarInfo("l")
    link.type, link.linkname = tarfile.SYMTYPE, "t" * 5000
    cases = [(_archive(long_name), "larger than 64 KiB"), (_archive(pax, fmt=tarfile.PAX_FORMAT), "larger than 64 KiB"),
             (_archive(deep), "deeper than 256 directories"), (_archive(link), "the target of the link 'l'")]
    for data, expected in cases:
        with pytest.raises(RequestProblem) as info:
            model_def.decode_model_def(data, "model:T")
        text = info.value.message + " ".join(info.value.problems)
        assert info.value.status == 400 and expected in text and len(text) < 1000, text
    assert model_def.decode_model_def(_archive(tarfile.TarInfo("/".join(["d"] * 200))), "model:T")
