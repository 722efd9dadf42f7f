"""Interactive tasks through the master (issue 31's targets), in one run, as ratios:

1. a proxied HTTP request to JupyterLab (`GET /proxy/<id>/api/status`) against the same request made directly to
   JupyterLab's port: p50 of 200 requests each (target: <= 1.3x);
2. `scp` of a 100 MB file through `det shell` (ssh's ProxyCommand, the master's WebSocket relay) against `scp`
   straight to the same SSH server's port: MB/s (target: >= 50 MB/s, and <= 1.5x the direct time);
3. `det notebook start` until JupyterLab answers through the proxy, against JupyterLab's own start-up (the same
   command run by hand until /api/status answers) (target: <= 1.5x).

    .venv/bin/python benchmarks/tasks_proxy.py
"""
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, List

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from determined.common.api import Session  # noqa: E402
from determined.master import embedded  # noqa: E402
from determined.master.rm import Slots  # noqa: E402


def wait_for(what: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def p50(samples: List[float]) -> float:
    return statistics.median(samples)


def timed_gets(client: httpx.Client, url: str, headers: dict, n: int = 200) -> List[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        answer = client.get(url, headers=headers)
        out.append(time.perf_counter() - start)
        assert answer.status_code == 200, answer.text
    return out


def main() -> None:
    root = pathlib.Path(tempfile.mkdtemp(prefix="det-bench-tasks-"))
    os.environ["XDG_CONFIG_HOME"] = str(root / "config")
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")
    running = embedded.start(root / "data", slots=Slots(gpus=[], cpu_count=1))
    running.master.tasks.poll_s = 0.05
    os.environ["DET_MASTER"] = running.url
    try:
        admin = Session(running.url, user="admin")
        admin.login("admin", "", make_default=True)
        # 3. notebook start through the master vs JupyterLab by hand
        start = time.perf_counter()
        nb = admin.post("/notebooks", {"config": {"resources": {"slots": 0}}})["task"]
        auth = {"Authorization": f"Bearer {admin.token}"}
        status = f"{running.url}/proxy/{nb['id']}/api/status"
        wait_for(lambda: httpx.get(status, headers=auth).status_code == 200)
        through_master = time.perf_counter() - start
        port = running.master.tasks.endpoint(nb["id"])[0]
        secret = running.master.tasks.endpoint(nb["id"])[1]
        from determined.master.tasks.notebook import jupyter_command

        own_port = port + 1 if port < 65000 else port - 1
        start = time.perf_counter()
        by_hand = subprocess.Popen(jupyter_command(sys.executable, port=own_port, base_url="/x/", token="t",
                                                   root_dir=str(root), allow_root=os.geteuid() == 0),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "JUPYTER_RUNTIME_DIR": str(root / "rt")})

        def own_answers() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{own_port}/x/api/status",
                                 headers={"Authorization": "token t"}).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(own_answers)
        own = time.perf_counter() - start
        by_hand.kill()
        by_hand.wait()
        print(f"notebook start: through the master {through_master:.2f} s, JupyterLab alone {own:.2f} s, "
              f"ratio {through_master / own:.2f} (target <= 1.5)")
        # 1. proxied HTTP vs direct
        with httpx.Client() as client:
            direct_url = f"http://127.0.0.1:{port}/proxy/{nb['id']}/api/status"
            timed_gets(client, direct_url, {"Authorization": f"token {secret}"}, 20)  # warm both
            timed_gets(client, status, auth, 20)
            direct = timed_gets(client, direct_url, {"Authorization": f"token {secret}"})
            proxied = timed_gets(client, status, auth)
        print(f"HTTP p50: direct {p50(direct) * 1000:.2f} ms, through the proxy {p50(proxied) * 1000:.2f} ms, "
              f"ratio {p50(proxied) / p50(direct):.2f} (target <= 1.3)")
        admin.post(f"/tasks/{nb['id']}/kill")
        # 2. scp of 100 MB through det shell vs straight to the SSH server
        shell = admin.post("/shells", {"config": {"resources": {"slots": 0}}})["task"]
        wait_for(lambda: admin.get(f"/tasks/{shell['id']}")["task"]["state"] == "STATE_RUNNING")
        line = subprocess.run([sys.executable, "-m", "determined.cli.main", "shell", "show-ssh-command", shell["id"]],
                              capture_output=True, text=True, check=True).stdout.strip()
        ssh = shlex.split(line)
        options = ssh[1:-1]
        data = root / "100mb.bin"
        data.write_bytes(os.urandom(100 * 2**20))
        shell_port = running.master.tasks.endpoint(shell["id"])[0]
        direct_options = [o for o in options if not o.startswith("ProxyCommand=")]
        direct_options = [o for i, o in enumerate(direct_options) if not (o == "-o" and i + 1 < len(direct_options)
                                                                          and direct_options[i + 1] == "-o")]

        def scp(opts: List[str], target: str) -> float:
            start = time.perf_counter()
            subprocess.run(["scp", *opts, str(data), target], check=True, capture_output=True)
            return time.perf_counter() - start

        straight = scp(["-P", str(shell_port), *direct_options], f"admin@127.0.0.1:{root}/direct.bin")
        proxied_s = scp(options, f"{ssh[-1]}:{root}/proxied.bin")
        print(f"scp 100 MB: straight {straight:.2f} s ({100 / straight:.0f} MB/s), through the master "
              f"{proxied_s:.2f} s ({100 / proxied_s:.0f} MB/s), ratio {proxied_s / straight:.2f} "
              f"(targets: >= 50 MB/s, <= 1.5)")
        admin.post(f"/tasks/{shell['id']}/kill")
    finally:
        running.stop(timeout=10)


if __name__ == "__main__":
    main()
