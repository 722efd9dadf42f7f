"""A master that stops ends its tasks and says so. One that died (SIGKILL) leaves them running under their keepers
(tasks/keeper.py): the next master finds them again, holds their slots before any trial or task is scheduled, and
records why a task whose keeper is gone ended."""
import os
import pathlib
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from determined.common.api import Session
from determined.master import embedded
from determined.master.db.models import Task
from determined.master.rm import Slots
from determined.master.tasks import states


def wait_for(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_tasks_end_with_the_master_and_a_restart_says_why(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    running = embedded.start(data, slots=Slots(gpus=[], cpu_count=1))
    try:
        admin = Session(running.url, user="admin")
        admin.login("admin", "", make_default=False)
        task = admin.post("/commands", {"config": {"entrypoint": ["sleep 60"]}})["task"]
        wait_for(lambda: admin.get(f"/tasks/{task['id']}")["task"]["state"] == states.RUNNING)
        assert running.master.rm.free_slots() == 0
        with running.master.write() as s:  # as a master that was SIGKILLed left it: recorded as running
            s.add(Task(id="dead-task", task_type=states.COMMAND, state=states.RUNNING, description="left", owner="admin",
                       config={"entrypoint": ["true"]}, slots=0, resource_pool="default", kill_requested=False,
                       pid=999999, pid_start=1))
            s.add(Task(id="ray-task", task_type=states.NOTEBOOK, state=states.RUNNING, description="on a node",
                       owner="admin", config={}, slots=0, resource_pool="default", kill_requested=False))
    finally:
        running.stop(timeout=10)
    restarted = embedded.start(data, slots=Slots(gpus=[], cpu_count=1))
    try:
        admin = Session(restarted.url, user="admin")
        admin.login("admin", "", make_default=False)
        stopped = admin.get(f"/tasks/{task['id']}")["task"]
        assert stopped["state"] == states.TERMINATED and "the master stopped" in stopped["exitStatus"]
        left = admin.get("/tasks/dead-task")["task"]
        assert left["state"] == states.TERMINATED and "keeper process ended while the master was down" in \
            left["exitStatus"]
        on_ray = admin.get("/tasks/ray-task")["task"]  # started on a Ray node: no keeper of this machine's
        assert on_ray["state"] == states.TERMINATED and "ran on a Ray node" in on_ray["exitStatus"]
        assert restarted.master.rm.free_slots() == 1  # nothing is counted as held
    finally:
        restarted.stop(timeout=10)


# ------------------------------------------------------------ SIGKILL of a `det master up` (issue 31)

COUNTER = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
i = 0
while True:
    print(f"line {i}", flush=True)
    i += 1
    time.sleep(0.02)
"""


def _numbers(session: Session, task_id: str) -> List[int]:
    logs = session.get(f"/tasks/{task_id}/logs", params={"limit": 10_000})["logs"]
    return [int(line["message"].split()[1]) for line in logs
            if line["stream"] == "stdout" and line["message"].startswith("line ")]


def _keepers(data_dir: pathlib.Path, db: Optional[str]) -> Dict[str, Tuple[int, int]]:
    """{task id: (keeper pid, its start time)} of the tasks the database holds as running, read directly."""
    from sqlalchemy import select

    from determined.master.db import engine as db_engine

    engine = db_engine.make_engine(db or db_engine.default_db_url(data_dir))
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(Task.id, Task.pid, Task.pid_start)
                                .where(Task.state.in_(states.HOLDING))).all()
    finally:
        engine.dispose()
    return {task_id: (pid, start) for task_id, pid, start in rows if pid}


def _processes_of(task_id: str) -> List[int]:
    """The live processes of a task (its DET_TASK_ID), found in /proc."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"DET_TASK_ID={task_id}".encode() in f.read().split(b"\0"):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _token_revoked(data_dir: pathlib.Path, db: Optional[str], task_id: str) -> Optional[bool]:
    """Whether the token the task acts with is revoked (None: the task has none recorded)."""
    from sqlalchemy import select

    from determined.master.db import engine as db_engine
    from determined.master.db.models import AuthToken

    engine = db_engine.make_engine(db or db_engine.default_db_url(data_dir))
    try:
        with engine.connect() as conn:
            return conn.execute(select(AuthToken.revoked).join(Task, Task.token_hash == AuthToken.token_hash)
                                .where(Task.id == task_id)).scalar()
    finally:
        engine.dispose()


def test_sigkill_of_the_master_leaves_tasks_running_and_the_next_master_finds_them(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A notebook, a shell and a command (holding the only slot) run; the master is SIGKILLed; while no master
    runs, the keeper of a second command is SIGKILLed and a third command ends (exit code 4). A restarted master on
    the same data dir finds the three again: the notebook answers through the proxy, the shell runs `ssh ...
    hostname`, the command's log lines go on with none lost or repeated, a queued 1-slot command waits while the
    found command holds the slot and starts when it is killed (its exit code recorded). The command whose keeper
    died is TERMINATED with that reason, the one that ended with its exit code and its last line."""
    pytest.importorskip("asyncssh")
    pytest.importorskip("jupyterlab")
    import shlex
    import socket
    import subprocess

    import httpx

    from determined.cli.main import main
    from determined.master.tasks import keeper
    from tests.server._server import ServerProcess, server_db_url

    data, db = tmp_path / "data", server_db_url()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where the CLI keeps the shell's key
    server = ServerProcess(data, db=db, cpu_slots=1, fake=False).start()
    launched: List[str] = []
    stray: Optional[keeper.KeeperHandle] = None
    try:
        admin = Session(server.url, user="admin")
        admin.login("admin", "", make_default=False)
        counter = admin.post("/commands", {"config": {"entrypoint": [sys.executable, "-c", COUNTER]}})["task"]["id"]
        doomed = admin.post("/commands", {"config": {"entrypoint": ["sleep 600 && true"],
                                                     "resources": {"slots": 0}}})["task"]["id"]
        marker = tmp_path / "go"
        ending = admin.post("/commands", {"config": {
            "entrypoint": ["sh", "-c", f'while [ ! -e {marker} ]; do sleep 0.05; done; echo bye; exit 4'],
            "resources": {"slots": 0}}})["task"]["id"]
        shell = admin.post("/shells", {"config": {"resources": {"slots": 0}}})["task"]["id"]
        notebook = admin.post("/notebooks", {"config": {"resources": {"slots": 0}}})["task"]["id"]
        queued = admin.post("/commands", {"config": {"entrypoint": ["echo second"]}})["task"]["id"]
        launched += [counter, doomed, ending, shell, notebook, queued]
        for task_id in (counter, doomed, ending, shell, notebook):
            wait_for(lambda: admin.get(f"/tasks/{task_id}")["task"]["state"] == states.RUNNING, timeout=120)
        wait_for(lambda: len(_numbers(admin, counter)) >= 10)
        before = _numbers(admin, counter)

        assert server.signal(signal.SIGKILL) == -signal.SIGKILL
        found = _keepers(data, db)
        assert set(found) == {counter, doomed, ending, shell, notebook}
        pid, start = found[doomed]
        assert all(keeper.process_start(p) == started is not None for p, started in found.values()), \
            "every keeper outlived the master"
        wait_for(lambda: len(_processes_of(doomed)) >= 2)  # its shell and the `sleep` the shell started
        os.kill(pid, signal.SIGKILL)  # ...but this one dies while no master runs
        marker.write_text("")  # and this one ends by itself
        wait_for(lambda: keeper.process_start(found[ending][0]) is None)
        wait_for(lambda: keeper.process_start(pid) is None)
        # a keeper no task records (its master died before storing the task): the next master stops it
        stray_dir = data / "work" / "tasks" / "unrecorded.keeper"
        stray = keeper.start({"argv": ["sleep", "600"], "env": {}, "cwd": str(tmp_path), "dir": str(stray_dir),
                              "line_bytes": 1024, "budget": 1024})

        server.start()
        assert stray.popen is not None and stray.popen.wait(timeout=30) == 0 and not stray_dir.exists()
        admin = Session(server.url, user="admin")
        admin.login("admin", "", make_default=True)
        assert _processes_of(doomed) == []  # the `sleep` that outlived its shell is killed too
        gone = admin.get(f"/tasks/{doomed}")["task"]
        assert gone["state"] == states.TERMINATED and "keeper process ended while the master was down" in \
            gone["exitStatus"]
        by_itself = admin.get(f"/tasks/{ending}")["task"]
        assert by_itself["state"] == states.TERMINATED and by_itself["exitCode"] == 4
        assert "failed with exit code 4 while the master was down" in by_itself["exitStatus"]
        assert "bye" in [line["message"] for line in admin.get(f"/tasks/{ending}/logs")["logs"]]
        for task_id in (counter, shell, notebook):
            assert admin.get(f"/tasks/{task_id}")["task"]["state"] == states.RUNNING
        # the command's lines written while no master ran are stored, once each; the queued command still waits
        wait_for(lambda: len(_numbers(admin, counter)) > len(before) + 10)
        assert admin.get(f"/tasks/{queued}")["task"]["state"] == states.QUEUED
        held = [t for t in admin.get("/tasks", params={"active": "true"})["tasks"] if t["state"] != states.QUEUED]
        assert sum(t["slots"] for t in held) == 1
        # the notebook answers through the proxy, the shell through ssh
        status = httpx.get(f"{server.url}/proxy/{notebook}/api/status",
                           headers={"Authorization": f"Bearer {admin.token}"}, timeout=30)
        assert status.status_code == 200 and "started" in status.json()
        monkeypatch.setenv("DET_MASTER", server.url)
        assert main(["shell", "show-ssh-command", shell]) == 0
        ssh = shlex.split(capsys.readouterr().out.strip())
        run = subprocess.run(ssh + ["hostname"], capture_output=True, text=True, timeout=60)
        assert run.stdout.split() == [socket.gethostname()], run.stderr
        assert _token_revoked(data, db, counter) is False  # the token it acts with still opens the API
        # killing the found command records its exit code, and its slot goes (once) to the queued command
        admin.post(f"/commands/{counter}/kill")
        ended = wait_for(lambda: (lambda t: t if t["state"] == states.TERMINATED else None)(
            admin.get(f"/tasks/{counter}")["task"]))
        assert ended["exitCode"] == 3 and "killed by admin" in ended["exitStatus"]
        numbers = _numbers(admin, counter)
        assert numbers == list(range(len(numbers))) and numbers[:len(before)] == before
        assert _token_revoked(data, db, counter) is True
        wait_for(lambda: admin.get(f"/tasks/{queued}")["task"]["state"] == states.TERMINATED)
        assert "second" in [line["message"] for line in admin.get(f"/tasks/{queued}/logs")["logs"]]
        for task_id in (shell, notebook):
            admin.post(f"/tasks/{task_id}/kill")
    finally:
        server.stop()
        for pid, start in _keepers(data, db).values():  # a test that failed while no master ran
            if keeper.process_start(pid) == start:
                os.kill(pid, signal.SIGKILL)
        if stray is not None and stray.popen is not None and stray.popen.poll() is None:
            stray.signal(signal.SIGKILL)
            stray.popen.wait(timeout=10)
        for pid in [p for task_id in launched for p in _processes_of(task_id)]:  # what a failed test left
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
