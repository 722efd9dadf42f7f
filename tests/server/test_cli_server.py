"""`det` against a `det master up` server through DET_MASTER: wait exit codes, archive, live logs."""
import os
import pathlib
import subprocess
import sys
import time
from typing import Iterator

import pytest

from tests.client._cli import det
from tests.master._helpers import config, model_def

from ._server import ServerProcess, server_db_url


@pytest.fixture
def server(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    # Trial 3 always crashes (FAKE_CRASH_TRIAL): with max_restarts 0 its experiment ends in ERROR.
    master = ServerProcess(tmp_path / "data", db=server_db_url(), env={"FAKE_CRASH_TRIAL": "3"}).start()
    monkeypatch.setenv("DET_MASTER", master.url)
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path / "elsewhere"))  # DET_MASTER, not the data dir, finds the master
    try:
        yield master
    finally:
        master.stop()


def create(length: int = 20, **extra: object) -> int:
    body = {"config": config(max_trials=1, length=length, **extra), "model_definition": model_def()}
    from determined.experimental import _connect

    return int(_connect.read_session().post("/experiments", body)["experiment"]["id"])


@pytest.mark.slow
def test_wait_exit_codes_archive_and_live_logs(server: ServerProcess, tmp_path: pathlib.Path) -> None:
    # Trial 1: follow its logs live while it runs (a long operation), then kill it.
    slow = create(length=100000)
    assert det("experiment", "archive", str(slow)).returncode == 1, "an ACTIVE experiment cannot be archived"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    follower = subprocess.Popen([sys.executable, "-m", "determined.cli.main", "trial", "logs", "-f", "1"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert follower.stdout is not None
        # the master's line that the run starts, then the trial's stdout and stderr, in capture order
        first = [follower.stdout.readline() for _ in range(3)]
        assert first[0].startswith("[master] run 1 starts at batch 0"), first
        assert any("fake trial 1 starts at batch 0" in line for line in first), first
        assert follower.poll() is None, "logs -f keeps following a running trial"
        assert server.session().get("/trials/1")["trial"]["state"] == "ACTIVE"
        assert det("experiment", "kill", str(slow)).returncode == 0
        assert follower.wait(60) == 0, "logs -f returns once the trial has ended"
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()

    done = create(length=20)
    errored = create(length=20, max_restarts=0)  # its trial is trial 3
    for exp_id, code, state in ((done, 0, "COMPLETED"), (errored, 1, "ERROR"), (slow, 2, "CANCELED")):
        result = det("experiment", "wait", str(exp_id), "--polling-interval", "0.2")
        assert (result.returncode, result.stdout.strip()) == (code, f"Experiment {exp_id} ended: {state}"), result

    assert det("experiment", "archive", str(done)).returncode == 0
    listed = det("experiment", "list", "--csv", check=True).stdout
    assert str(done) not in [line.split(",")[0] for line in listed.splitlines()[1:]]
    listed_all = det("experiment", "list", "--all", "--csv", check=True).stdout
    assert str(done) in [line.split(",")[0] for line in listed_all.splitlines()[1:]]
    assert det("experiment", "unarchive", str(done)).returncode == 0
    assert str(done) in [line.split(",")[0] for line in det("experiment", "list", "--csv").stdout.splitlines()[1:]]


def test_bad_options_of_master_up_are_clear_errors(tmp_path: pathlib.Path) -> None:
    for argv, needle in ((["--db", "mysql://x/y"], "unsupported database URL"),
                         (["--cpu-slots", "0"], "--cpu-slots must be a positive"),
                         (["--port", "70000"], "--port must be between")):
        result = det("master", "up", "--data-dir", str(tmp_path / "d"), *argv)
        assert result.returncode == 1 and needle in result.stderr and "Traceback" not in result.stderr, result.stderr
    started = time.monotonic()
    assert time.monotonic() - started < 5
