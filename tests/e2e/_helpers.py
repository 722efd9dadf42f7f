"""Helpers for end-to-end tests that drive the real `det` command and real trial processes."""
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional

import yaml

from tests import _patience, _postgres
from tests.client import _cli as in_process

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "digits_pytorch"


def det(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
    """A real `det` process. Under DET_TEST_DB=postgres it gets the database of the data dir it runs on."""
    full_env = {**os.environ, **(env or {})}
    data_dir = full_env.get("DET_DATA_DIR")
    if data_dir and "DET_DB_URL" not in (env or {}) and _postgres.is_exported(full_env.get("DET_DB_URL")):
        full_env["DET_DB_URL"] = _postgres.database_url_for_subprocesses(data_dir) or ""
    proc = subprocess.run(
        [sys.executable, "-m", "determined", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"det {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def det_json(*args: str) -> Any:
    """`det ARGS --json`, parsed. Run in this process (the real CLI code, see tests/client/_cli.py): the reads
    after an experiment need no new Python start each; `det(...)` runs a real `det` process."""
    return in_process.det_json(*args)


def small_config(tmp: pathlib.Path, name: str = "random.yaml", **overrides: Any) -> pathlib.Path:
    """A copy of an example config made small enough for a test, with overrides merged at top level."""
    cfg = yaml.safe_load((EXAMPLE / name).read_text())
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    path = tmp / f"cfg-{name}"
    path.write_text(yaml.safe_dump(cfg))
    return path


def copy_example(tmp: pathlib.Path) -> pathlib.Path:
    dst = tmp / "model"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def harness_pids(experiment_id: int) -> List[int]:
    """Process ids of the trial processes of one experiment of this test's data dir, found through /proc."""
    data_dir = os.environ.get("DET_DATA_DIR")
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if _forked_trial(entry, cmdline, data_dir):
                pids.append(int(entry.name))
                continue
            if b"determined.exec.harness" not in cmdline:
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"DET_EXPERIMENT_ID={experiment_id}".encode() not in environ:
            continue
        if data_dir and f"DET_DATA_DIR={data_dir}".encode() not in environ:
            continue  # another test run's trial (e.g. a second checkout running its own suite)
        pids.append(int(entry.name))
    return pids


def _forked_trial(entry: pathlib.Path, cmdline: bytes, data_dir: Optional[str]) -> bool:
    """A trial forked from a fork server (determined/exec/forkserver.py): its command line is the server's and
    /proc shows the server's environment, so it is known by its parent (a server) and its working directory (the
    trial's, in this data dir). The tests that use this run one experiment at a time."""
    if b"determined.exec.forkserver" not in cmdline or not data_dir:
        return False
    ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
    if b"determined.exec.forkserver" not in pathlib.Path(f"/proc/{ppid}/cmdline").read_bytes():
        return False  # the server itself
    return os.readlink(entry / "cwd").startswith(os.path.join(data_dir, "work") + os.sep)


def wait_for(predicate, timeout: float = 120, interval: float = 0.3, what: str = "condition") -> Any:
    """Poll `predicate()` until true; fail after `timeout` s x the machine's load factor (tests/_patience.py)."""
    return _patience.wait_for(predicate, timeout, what, interval=interval)
