"""Interactive tasks run as their owner's OS account in a sandbox of their own (issue 33; tasks/runner.py): on a server
run as root with a trial user, alice's command (alice is linked to an OS account) runs as her account; while bob's
command runs, alice's cannot open bob's checkpoint files, the master's data dir or database, nor bob's /tmp (neither
through its own /tmp nor at the host path of bob's run), and its /proc shows its own processes only; what it writes
in its working directory belongs to her account, private to it. Carol's (unlinked) command runs as the trial user,
in the `work_dir` it names."""
import json
import os
import pathlib
import shutil
import stat
import sys
from typing import Any, Dict, List, Optional, Tuple

import pytest

from determined.common import context as det_context
from determined.common.api import Session
from determined.master.rm.sandbox import sandbox_problem

from ._server import server_db_url, wait_for
from .test_run_as_sandbox import accounts, root_dir  # noqa: F401 (fixtures: OS accounts, a passable dir)
from .test_trial_isolation import IsolatedServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or sandbox_problem() is not None,
                                reason="needs root (creates OS users, runs the master as root) and bubblewrap")

# Both wait (at most 2 minutes) for the test to write `go` into their working directory.
WAIT_FOR_GO = """
import os, time
for _ in range(1200):
    if os.path.exists("go"):
        break
    time.sleep(0.1)
"""

BOB = """
import pathlib
pathlib.Path("/tmp/bob-task-tmp-secret").write_text("bob's temporary file")
print("BOB READY", flush=True)
""" + WAIT_FOR_GO

ALICE = r"""
import json, os, subprocess

found = {"id_u": subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip(), "gid": os.getgid(),
         "cwd": os.getcwd()}


def attempt(name, action):
    try:
        found[name] = action()
    except OSError as e:
        found[name] = type(e).__name__


def cmdlines():
    seen = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                seen[pid] = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            seen[pid] = "?"
    return seen


data_dir, storage = os.environ["DATA_DIR"], os.environ["STORAGE"]
attempt("bob_checkpoint", lambda: open(os.path.join(storage, os.environ["BOB_CHECKPOINT"], "weights")).read())
attempt("list_storage", lambda: os.listdir(storage))
attempt("read_db", lambda: open(os.path.join(data_dir, "determined.db"), "rb").read(16).decode("latin-1"))
attempt("list_data_dir", lambda: os.listdir(data_dir))
attempt("list_tasks_dir", lambda: os.listdir(os.path.join(data_dir, "work", "tasks")))
attempt("bob_tmp", lambda: open("/tmp/bob-task-tmp-secret").read())
attempt("bob_tmp_host", lambda: open(os.environ["BOB_TMP"]).read())
attempt("bob_pid", lambda: open(f"/proc/{os.environ['BOB_PID']}/cmdline", "rb").read().decode("latin-1"))
attempt("procs", cmdlines)
with open("alice-wrote.txt", "w") as f:
    f.write("alice's own")
print("ALICE " + json.dumps(found), flush=True)
""" + WAIT_FOR_GO


def _command(session: Session, model_dir: Optional[pathlib.Path], entrypoint: List[str], env: Dict[str, str],
             **more: Any) -> str:
    config = {"entrypoint": entrypoint, "resources": {"slots": 0},
              "environment": {"environment_variables": [f"{k}={v}" for k, v in env.items()]}, **more}
    body: Dict[str, Any] = {"config": config}
    if model_dir is not None:
        body["context"] = det_context.pack_model_dir_b64(str(model_dir))
    return str(session.post("/commands", body)["task"]["id"])


def _logs(session: Session, task_id: str) -> List[str]:
    return [line["message"] for line in session.get(f"/tasks/{task_id}/logs")["logs"]]


def _line(session: Session, task_id: str, prefix: str) -> str:
    found = [line for line in _logs(session, task_id) if line.startswith(prefix)]
    return found[0] if found else ""


def _ended(session: Session, task_id: str) -> Dict[str, Any]:
    return dict(wait_for(lambda: (lambda t: t if t["state"] == "STATE_TERMINATED" else None)(
        session.get(f"/tasks/{task_id}")["task"]), 60, f"task {task_id} to end"))


def _processes_running(cmdline: List[str]) -> List[int]:
    """The processes of this machine whose command line is `cmdline` (not those that pass it on, like bwrap)."""
    wanted, found = b"".join(a.encode() + b"\0" for a in cmdline), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read() == wanted:
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _bob_checkpoint(storage: pathlib.Path, bob: Tuple[int, int]) -> str:
    """A checkpoint as bob's trial leaves it: a directory of bob's, private to him, in the storage root."""
    uuid = "0b0b0b0b-0000-4000-8000-00000000b0b0"
    path = storage / uuid
    path.mkdir(mode=0o700)
    (path / "weights").write_text("bob's weights")
    for entry, mode in ((path, 0o700), (path / "weights", 0o600)):
        os.chown(entry, *bob)
        os.chmod(entry, mode)
    return uuid


def test_a_linked_users_command_runs_as_her_account_in_a_sandbox_of_its_own(
        accounts: Dict[str, Any], root_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:  # noqa: F811 (fixtures)
    data_dir = root_dir / "data"
    storage = data_dir / "checkpoints"
    server = IsolatedServer(data_dir, db=server_db_url(), fake=False, cpu_slots=2,
                            args=["--trial-user", accounts["default_name"]])
    server.start()
    try:
        assert "NOT SANDBOXED" not in server.output() and "NOT ISOLATED" not in server.output()
        admin = Session(server.url, user="admin")
        for who in ("alice", "bob", "carol"):
            admin.post("/users", {"username": who, "password": ""})
        for who in ("alice", "bob"):
            uid, gid = accounts[who]
            name = accounts[f"{who}_name"]
            admin.patch(f"/users/{who}", {"agent_user_group": {
                "agent_uid": uid, "agent_gid": gid, "agent_user": name, "agent_group": name}})
        sessions = {who: Session(server.url, user=who) for who in ("alice", "bob", "carol")}
        bob_checkpoint = _bob_checkpoint(storage, accounts["bob"])
        models = {}
        for who, script in (("alice", ALICE), ("bob", BOB)):
            models[who] = tmp_path / who
            models[who].mkdir()
            (models[who] / "probe.py").write_text(script)
        python = sys.executable  # the master's own Python, which every account may run

        marker = f"bob-task-{os.getpid()}"  # this run's: a process left by another run is not this one's
        bob_task = _command(sessions["bob"], models["bob"], [python, "probe.py", marker], {})
        wait_for(lambda: _line(sessions["bob"], bob_task, "BOB READY"), 60, "bob's command")
        bob_dir = data_dir / "work" / "tasks" / bob_task
        [bob_pid] = _processes_running([python, "probe.py", marker])
        assert os.stat(f"/proc/{bob_pid}").st_uid == accounts["bob"][0]  # bob's command runs as his account
        assert (bob_dir / ".tmp" / "bob-task-tmp-secret").stat().st_uid == accounts["bob"][0]  # where bob's /tmp is

        alice_task = _command(sessions["alice"], models["alice"], [python, "probe.py"], {
            "DATA_DIR": str(data_dir), "STORAGE": str(storage), "BOB_CHECKPOINT": bob_checkpoint,
            "BOB_TMP": str(bob_dir / ".tmp" / "bob-task-tmp-secret"), "BOB_PID": str(bob_pid)})
        carol_task = _command(sessions["carol"], None, ["sh", "-c", 'echo "CAROL $(id -u) $(id -g) $(pwd)"'], {},
                              work_dir="/")
        line = wait_for(lambda: _line(sessions["alice"], alice_task, "ALICE "), 60, "alice's command")
        found = json.loads(line.split("ALICE ", 1)[1])

        # Alice's command runs as her account and sees nothing of bob's or the master's.
        assert (found["id_u"], found["gid"]) == (str(accounts["alice"][0]), accounts["alice"][1]), found
        for what in ("bob_checkpoint", "read_db", "bob_tmp", "bob_tmp_host", "bob_pid"):
            assert found[what] in ("PermissionError", "FileNotFoundError"), (what, found)
        assert bob_checkpoint not in found["list_storage"], found
        assert set(found["list_data_dir"]) <= {"work"}, found  # only the run's own directories are bound back
        assert bob_task not in found["list_tasks_dir"], found
        # Its /proc: its own sandbox's processes (bwrap's init, the shell of its entrypoint, itself), no other.
        procs = found["procs"]
        assert len(procs) <= 4 and all("probe.py" in c or "bwrap" in c or c.startswith(("/bin/sh", "sh "))
                                       for c in procs.values()), procs
        assert not any(marker in c or "determined.cli.main" in c for c in procs.values()), procs

        # What it writes in its working directory is hers, private to her.
        alice_dir = data_dir / "work" / "tasks" / alice_task
        assert found["cwd"] == str(alice_dir), found
        st = (alice_dir / "alice-wrote.txt").stat()
        assert (st.st_uid, st.st_gid) == accounts["alice"] and stat.S_IMODE(st.st_mode) & 0o077 == 0, oct(st.st_mode)

        # The unlinked user's command runs as the trial user, in the work_dir it names.
        assert _ended(sessions["carol"], carol_task)["exitCode"] == 0, _logs(sessions["carol"], carol_task)
        assert _line(sessions["carol"], carol_task, "CAROL ") == "CAROL {} {} /".format(*accounts["default"])

        for who, task_id, directory in (("alice", alice_task, alice_dir), ("bob", bob_task, bob_dir)):
            (directory / "go").write_text("")
            assert _ended(sessions[who], task_id)["exitCode"] == 0, _logs(sessions[who], task_id)
            assert not directory.exists()  # its run directory, its /tmp with it, is removed
        assert _processes_running([python, "probe.py", marker]) == []
    finally:
        server.stop()
