"""`det deploy local cluster-up|cluster-down`: a `det master up` in the background, the way Determined 0.38 users
start a local cluster (there with Docker; here one process, no Docker).

`cluster-up` starts `det master up` detached, writes `cluster.json` (pid, port, URL, log file) in the data dir, and
returns once the master answers; `cluster-down` sends it SIGTERM (running trials checkpoint first) and waits for it
to exit.
"""
import argparse
import json
import os
import pathlib
import sys
import time
from typing import Any, Dict, Optional

from determined import common, errors

PID_FILE = "cluster.json"
LOG_FILE = "cluster.log"
DEFAULT_PORT = 8080


def _data_dir(args: argparse.Namespace) -> pathlib.Path:
    return (pathlib.Path(args.data_dir).expanduser().resolve() if args.data_dir else common.data_dir())


def _alive(pid: int) -> bool:
    from determined.master.embedded import _pid_alive

    return _pid_alive(pid)


def _read(path: pathlib.Path) -> Optional[Dict[str, Any]]:
    from determined.master.embedded import _read_lock

    data = _read_lock(path)
    return data if data is not None and isinstance(data.get("pid"), int) else None


def _answers(url: str) -> bool:
    from determined.master.embedded import _master_info

    return _master_info(url) is not None


def cluster_up(args: argparse.Namespace) -> int:
    import subprocess  # here, not at the top: every `det` command imports this module to build its parser

    data_dir = _data_dir(args)
    data_dir.mkdir(parents=True, exist_ok=True)
    pid_path = data_dir / PID_FILE
    running = _read(pid_path)
    if running is not None and _alive(running["pid"]):
        raise errors.DeterminedError(f"a cluster already runs on {data_dir}: master {running['url']} (pid "
                                     f"{running['pid']}); stop it with `det deploy local cluster-down`")
    from determined.master import embedded

    other = embedded.running_master_url(data_dir, wait=0)
    if other:
        raise errors.DeterminedError(f"a master already runs on {data_dir} at {other} (started by another det "
                                     "command); stop it first, or use it: export DET_MASTER=" + other)
    if not 0 < args.master_port < 65536:
        raise errors.DeterminedError(f"--master-port must be a port number (1 to 65535), not {args.master_port}")
    url = f"http://127.0.0.1:{args.master_port}"
    if _answers(url):
        raise errors.DeterminedError(f"port {args.master_port} is taken by another server ({url} answers); "
                                     "choose another with --master-port")
    command = [sys.executable, "-m", "determined.cli.main", "master", "up", "--port", str(args.master_port),
               "--data-dir", str(data_dir)]
    if args.db:
        command += ["--db", args.db]
    if args.cpu_slots is not None:
        command += ["--cpu-slots", str(args.cpu_slots)]
    log_path = data_dir / LOG_FILE
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "DET_MASTER": ""})
    pid_path.write_text(json.dumps({"pid": proc.pid, "port": args.master_port, "url": url, "log": str(log_path)}))
    deadline = time.monotonic() + args.timeout
    while not _answers(url):
        if proc.poll() is not None:
            pid_path.unlink(missing_ok=True)
            tail = log_path.read_text(errors="replace").splitlines()[-5:]
            raise errors.DeterminedError("the master did not start (exit code "
                                         f"{proc.returncode}); the end of {log_path}:\n" + "\n".join(tail))
        if time.monotonic() > deadline:
            _stop(proc.pid, 30.0)
            pid_path.unlink(missing_ok=True)
            raise errors.DeterminedError(f"the master did not answer at {url} within {args.timeout:.0f}s; see {log_path}")
        time.sleep(0.2)
    print(f"Cluster up: master at {url} (pid {proc.pid}, data dir {data_dir}, log {log_path})")
    print(f"Use it with: export DET_MASTER={url}\nStop it with: det deploy local cluster-down")
    return 0


def _stop(pid: int, timeout: float) -> bool:
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)  # our own child (tests): reap it
            if done == pid:
                return True
        except ChildProcessError:
            pass
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def cluster_down(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    pid_path = data_dir / PID_FILE
    running = _read(pid_path)
    if running is None or not _alive(running["pid"]):
        pid_path.unlink(missing_ok=True)
        print(f"No cluster runs on {data_dir}.")
        return 0
    print(f"Stopping the master at {running['url']} (pid {running['pid']}): running trials checkpoint first…",
          flush=True)
    if not _stop(running["pid"], args.timeout):
        raise errors.DeterminedError(f"the master (pid {running['pid']}) did not stop within {args.timeout:.0f}s; "
                                     f"see {running.get('log')}")
    pid_path.unlink(missing_ok=True)
    print("Cluster down.")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("deploy", help="start or stop a local cluster (a master in the background)")
    s = p.add_subparsers(dest="target", required=True, metavar="TARGET")
    local = s.add_parser("local", help="a cluster on this machine")
    ls = local.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    up = ls.add_parser("cluster-up", help="start `det master up` in the background and wait until it answers")
    up.add_argument("--master-port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    up.add_argument("--data-dir", default=None, help="data dir (default: $DET_DATA_DIR, else the user data dir)")
    up.add_argument("--db", default=None, metavar="URL", help="database URL (default: SQLite in the data dir)")
    up.add_argument("--cpu-slots", type=int, default=None, metavar="N", help="CPU slots of the master")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the master (default 60)")
    up.set_defaults(func=cluster_up)
    down = ls.add_parser("cluster-down", help="stop the master `cluster-up` started (trials checkpoint first)")
    down.add_argument("--data-dir", default=None, help="data dir (default: $DET_DATA_DIR, else the user data dir)")
    down.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for it to stop (default 120)")
    down.set_defaults(func=cluster_down)
