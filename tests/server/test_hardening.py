"""Server hardening, as the issue's probe attacked a real `det master up`: oversized bodies and archives, password
guessing and login storms, DNS rebinding (foreign Host headers), and the security headers of every answer."""
import base64
import io
import json
import socket
import statistics
import subprocess
import sys
import tarfile
import time
from typing import Dict, Iterator, List, Tuple

import httpx
import pytest

from tests.master._helpers import config

from ._server import ServerProcess, server_db_url

CONFIGURED_HOST = "det.example.com"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("hardening")
    proc = ServerProcess(root / "data", db=server_db_url(), args=["--allowed-host", CONFIGURED_HOST]).start()
    try:
        yield proc
    finally:
        proc.stop()


def login(url: str, username: str, password: str) -> httpx.Response:
    return httpx.post(f"{url}/api/v1/auth/login", json={"username": username, "password": password}, timeout=60)


def token_of(url: str, username: str, password: str = "") -> Dict[str, str]:
    answer = login(url, username, password)
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmHWM"].split()[0]) / 1024


def raw_request(url: str, head: str, body_chunks: Iterator[bytes], timeout: float = 30) -> Tuple[bytes, int]:
    """Send a request over a plain socket, its body as long as the server reads it; (the answer, body bytes sent)."""
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sent = 0
    try:
        sock.sendall(head.encode())
        sock.setblocking(False)
        answer = b""
        for chunk in body_chunks:
            try:
                answer += sock.recv(65536)
            except BlockingIOError:
                pass
            if answer:
                break
            try:
                sock.settimeout(5)
                sock.sendall(chunk)
                sock.setblocking(False)
            except OSError:  # the server answered and closed the connection
                break
            sent += len(chunk)
        sock.settimeout(timeout)
        try:
            while not answer.endswith(b"}"):
                more = sock.recv(65536)
                if not more:
                    break
                answer += more
        except OSError:
            pass
        return answer, sent
    finally:
        sock.close()


def test_oversized_bodies_are_refused_before_they_are_read(server: ServerProcess) -> None:
    url = server.url
    peak = peak_rss_mib(server.pid)
    mib = b"x" * (1024 * 1024)
    # 300 MB announced to the public login route: 413 at once, nothing read
    started = time.monotonic()
    answer, sent = raw_request(url, "POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                    f"application/json\r\nContent-Length: {300 * 1024 * 1024}\r\n\r\n",
                               iter([mib] * 300))
    assert answer.startswith(b"HTTP/1.1 413") and b"16 KiB allowed for a login" in answer, answer[:300]
    assert sent < 64 * 1024 * 1024 and time.monotonic() - started < 30
    # the same sent in chunks (no Content-Length): cut off once past the limit
    chunked = (f"{len(mib):x}\r\n".encode() + mib + b"\r\n" for _ in range(300))
    answer, sent = raw_request(url, "POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                    "application/json\r\nTransfer-Encoding: chunked\r\n\r\n", chunked)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert sent < 64 * 1024 * 1024
    # a 64 KB archive whose GNU long name unpacks to 64 MiB: a short 400, no memory spent on it
    headers = token_of(url, "admin")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz", format=tarfile.GNU_FORMAT, compresslevel=9) as tar:
        entry = tarfile.TarInfo("model.py")
        entry.size = 3
        tar.addfile(entry, io.BytesIO(b"x=1"))
        tar.addfile(tarfile.TarInfo("a" * (64 * 1024 * 1024)), io.BytesIO(b""))
    body = {"config": config(max_trials=1), "model_definition": base64.b64encode(archive.getvalue()).decode()}
    answer = httpx.post(f"{url}/api/v1/experiments", json=body, headers=headers, timeout=60)
    assert answer.status_code == 400 and "larger than 64 KiB" in answer.text and len(answer.content) < 2000
    assert peak_rss_mib(server.pid) - peak < 48, "the master read what it refused"
    assert httpx.get(f"{url}/api/v1/experiments", headers=headers, timeout=30).json()["experiments"] == []


def test_the_host_allow_list_and_security_headers(server: ServerProcess) -> None:
    url = server.url
    port = url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io"):
        answer = httpx.get(f"{url}/api/v1/master/info", headers={"Host": host}, timeout=30)
        assert answer.status_code == 421 and "allowed_hosts" in answer.text, (host, answer.text)
        assert httpx.get(f"{url}/", headers={"Host": host}, timeout=30).status_code == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", CONFIGURED_HOST,
                 f"{CONFIGURED_HOST}:443"):
        assert httpx.get(f"{url}/api/v1/master/info", headers={"Host": host}, timeout=30).status_code == 200, host
    headers = token_of(url, "determined")
    answers = {
        "page": httpx.get(f"{url}/", timeout=30),
        "script": httpx.get(f"{url}/static/app.js", timeout=30),
        "api": httpx.get(f"{url}/api/v1/experiments", headers=headers, timeout=30),
        "401": httpx.get(f"{url}/api/v1/experiments", timeout=30),
        "404": httpx.get(f"{url}/api/v1/experiments/999", headers=headers, timeout=30),
        "421": httpx.get(f"{url}/", headers={"Host": "evil.example"}, timeout=30),
        "413": httpx.post(f"{url}/api/v1/auth/login", content=b"x" * (17 * 1024), timeout=30),
    }
    for what, answer in answers.items():
        assert answer.headers.get("x-frame-options") == "DENY", what
        assert answer.headers.get("x-content-type-options") == "nosniff", what
        assert answer.headers.get("referrer-policy") == "no-referrer", what
        policy = answer.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, what
    assert answers["401"].status_code == 401 and answers["413"].status_code == 413


STORM = """
import json, sys, threading
import httpx
url, users = sys.argv[1], sys.argv[2:]
counts, stop = {}, threading.Event()
def storm(i):
    client = httpx.Client(timeout=60)
    user = users[i % len(users)]
    while not stop.is_set():
        status = client.post(url + "/api/v1/auth/login", json={"username": user, "password": user + "-pw"}).status_code
        counts[status] = counts.get(status, 0) + 1
threads = [threading.Thread(target=storm, args=(i,)) for i in range(16)]
[t.start() for t in threads]
print("started", flush=True)
sys.stdin.read()  # until the test closes it
stop.set()
[t.join() for t in threads]
print(json.dumps(counts), flush=True)
"""


def test_other_routes_stay_fast_during_a_login_storm(server: ServerProcess) -> None:
    """16 logins at once without end: the hashes queue on the master's own small pool, the other routes stay fast."""
    url = server.url
    admin = token_of(url, "admin")
    users = [f"storm-{i}" for i in range(4)]  # 4 threads each: never 5 tries of one name at once
    for user in users:
        httpx.post(f"{url}/api/v1/users", json={"username": user, "password": user + "-pw"}, headers=admin, timeout=60)
    client = httpx.Client(base_url=url, headers=admin, timeout=60)

    def median_latency(samples: int = 30) -> float:
        times: List[float] = []
        for _ in range(samples):
            started = time.perf_counter()
            assert client.get("/api/v1/me").status_code == 200
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    alone = median_latency()
    storm = subprocess.Popen([sys.executable, "-c", STORM, url, *users], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert storm.stdout is not None and storm.stdin is not None
        assert storm.stdout.readline().strip() == "started"
        time.sleep(1)  # the queue of hashes fills
        during = median_latency()
        storm.stdin.close()
        counts = json.loads(storm.stdout.readline())
        storm.wait(60)
    finally:
        if storm.poll() is None:
            storm.kill()
            storm.wait()
    alone_after = median_latency()
    baseline = max(alone, alone_after)
    print(f"login storm: median GET /me {baseline * 1000:.1f} ms alone, {during * 1000:.1f} ms during the storm "
          f"({during / baseline:.1f}x); logins answered: {counts}")
    assert counts.get("200", 0) >= 16 and set(counts) == {"200"}, counts
    # Before, hashing on the event loop made every route 80x slower; off the loop, what is left is the CPU the
    # hashes take on a shared machine (about 7x on a loaded 2-core CI machine)
    assert during < 20 * baseline


def test_password_guessing_backs_off_per_user_and_per_address(server: ServerProcess) -> None:
    """Last in this module: failing half way, it would leave the address waiting for the tests after it."""
    url = server.url
    admin = token_of(url, "admin")
    httpx.post(f"{url}/api/v1/users", json={"username": "alice", "password": "right"}, headers=admin, timeout=60)
    statuses = [login(url, "alice", f"guess-{i}").status_code for i in range(5)]
    assert statuses == [401] * 5, statuses
    refused = login(url, "alice", "right")  # while alice's name waits, even her password is not checked
    assert refused.status_code == 429 and "too many failed logins for user 'alice'" in refused.text
    wait = int(refused.headers["retry-after"])
    assert 1 <= wait <= 60
    time.sleep(wait)
    assert login(url, "alice", "right").status_code == 200  # and her count starts again
    assert login(url, "alice", "wrong").status_code == 401
    assert login(url, "alice", "right").status_code == 200  # a success clears her name, not the address's count
    # many names from one address: the address waits too, counting alice's 6 failures (issue 33: her own correct
    # logins do not wipe what the address guessed)
    statuses = [login(url, f"nobody-{i}", "x").status_code for i in range(20 - 6)]
    assert statuses == [401] * 14, statuses
    refused = login(url, "alice", "right")
    assert refused.status_code == 429 and "your address (127.0.0.1)" in refused.text
    time.sleep(int(refused.headers["retry-after"]))
    assert login(url, "alice", "right").status_code == 200  # after the wait, a right password works again
