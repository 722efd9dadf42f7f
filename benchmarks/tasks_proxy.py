"""Interactive tasks through the master (issue 31's targets), in one run, as ratios:

1. a proxied HTTP request to JupyterLab (`GET /proxy/<id>/api/status`) against the same request made directly to
   JupyterLab's port: p50 of 200 requests each (target: <= 1.3x);
2. `scp` of a 100 MB file through `det shell` (ssh's ProxyCommand, the master's WebSocket relay) against `scp`
   straight to the same SSH server's port: MB/s (target: >= 50 MB/s, and <= 1.5x the direct time);
3. `det notebook start` until JupyterLab answers through the proxy, against JupyterLab's own start-up (the same
   command run by hand until /api/status answers) (target: <= 1.5x).

Fair to both sides: the requests are timed by a client process of their own (not the master's, whose threads
would share its GIL), one httpx.Client with a kept-alive connection to each server, the direct and the proxied
request alternated one by one after a warm-up, so both meet the same load; scp runs alternate too, ROUNDS of
each, and the medians are compared. The load average is printed: the figures move with it.

    .venv/bin/python benchmarks/tasks_proxy.py [--rounds 3]
"""
import argparse
import json
import os
import pathlib
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

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


# Run in a process of its own: alternate the two requests, N of each after a warm-up, print their times as JSON.
TIMED_CLIENT = """
import json, sys, time, httpx
direct, direct_headers, proxied, proxied_headers, n = json.loads(sys.argv[1])
times = {"direct": [], "proxied": []}
with httpx.Client() as client:
    for i in range(20 + n):
        for name, url, headers in (("direct", direct, direct_headers), ("proxied", proxied, proxied_headers)):
            start = time.perf_counter()
            answer = client.get(url, headers=headers)
            elapsed = time.perf_counter() - start
            assert answer.status_code == 200, answer.text
            if i >= 20:
                times[name].append(elapsed)
print(json.dumps(times))
"""


def timed_gets(direct: str, direct_headers: dict, proxied: str, proxied_headers: dict,
               n: int = 200) -> Dict[str, List[float]]:
    out = subprocess.run([sys.executable, "-c", TIMED_CLIENT,
                          json.dumps([direct, direct_headers, proxied, proxied_headers, n])],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def load() -> str:
    return "%.1f" % os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="scp runs of each kind (alternated)")
    args = parser.parse_args()
    print(f"load average at start: {load()}")
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

        with socket.socket() as probe:  # a free port for JupyterLab by hand
            probe.bind(("127.0.0.1", 0))
            own_port = probe.getsockname()[1]
        start = time.perf_counter()
        by_hand = subprocess.Popen(jupyter_command(sys.executable, port=own_port, base_url="/x/", token="t",
                                                   root_dir=str(root), allow_root=os.geteuid() == 0),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "JUPYTER_RUNTIME_DIR": str(root / "rt")},
                                   start_new_session=True)  # as the master starts a task: with Linux's autogroup
        # scheduling a session shares the CPU as one, so a JupyterLab in this script's session would compete with
        # whatever else runs in it (a load run's busy loops) where the task's does not

        def own_answers() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{own_port}/x/api/status",
                                 headers={"Authorization": "token t"}).status_code == 200
            except httpx.HTTPError:
                return False
        try:
            wait_for(own_answers)
            own = time.perf_counter() - start
        finally:
            by_hand.kill()
            by_hand.wait()
        print(f"notebook start: through the master {through_master:.2f} s, JupyterLab alone {own:.2f} s, "
              f"ratio {through_master / own:.2f} (target <= 1.5)")
        # 1. proxied HTTP vs direct, with the master's default poll of the notebook (every 5 s; 0.05 s above only
        # so that its start is seen at once: its requests would share the master's GIL with the proxy's)
        from determined.master.tasks.runner import DEFAULT_POLL_S

        running.master.tasks.poll_s = DEFAULT_POLL_S
        time.sleep(0.3)  # the watcher's current wait (at most 0.2 s while it starts) ends
        direct_url = f"http://127.0.0.1:{port}/proxy/{nb['id']}/api/status"
        times = timed_gets(direct_url, {"Authorization": f"token {secret}"}, status, auth)
        direct, proxied = times["direct"], times["proxied"]
        print(f"HTTP p50 (200 each, alternated, load {load()}): direct {p50(direct) * 1000:.2f} ms, through the "
              f"proxy {p50(proxied) * 1000:.2f} ms, ratio {p50(proxied) / p50(direct):.2f} (target <= 1.3)")
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

        def ssh_true(opts: List[str], target: str) -> float:
            start = time.perf_counter()
            subprocess.run(["ssh", *opts, target, "true"], check=True, capture_output=True)
            return time.perf_counter() - start

        connects: Dict[str, List[float]] = {"straight": [], "proxied": []}
        for _ in range(5):
            connects["straight"].append(ssh_true(["-p", str(shell_port), *direct_options], "admin@127.0.0.1"))
            connects["proxied"].append(ssh_true(options, ssh[-1]))
        print(f"ssh HOST true (median of 5 each, alternated, load {load()}): straight "
              f"{p50(connects['straight']):.3f} s, through the master {p50(connects['proxied']):.3f} s")
        straights, proxieds = [], []
        for _ in range(args.rounds):
            straights.append(scp(["-P", str(shell_port), *direct_options], f"admin@127.0.0.1:{root}/direct.bin"))
            proxieds.append(scp(options, f"{ssh[-1]}:{root}/proxied.bin"))
        straight, proxied_s = p50(straights), p50(proxieds)
        print(f"scp 100 MB (median of {args.rounds} each, alternated, load {load()}): straight {straight:.2f} s "
              f"({100 / straight:.0f} MB/s), through the master {proxied_s:.2f} s ({100 / proxied_s:.0f} MB/s), "
              f"ratio {proxied_s / straight:.2f} (targets: >= 50 MB/s, <= 1.5); runs: straight "
              f"{', '.join(f'{t:.2f}' for t in straights)}, proxied {', '.join(f'{t:.2f}' for t in proxieds)}")
        admin.post(f"/tasks/{shell['id']}/kill")
    finally:
        running.stop(timeout=10)


if __name__ == "__main__":
    main()
