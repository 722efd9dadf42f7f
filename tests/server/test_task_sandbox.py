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
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from determined.common import context as det_context
from determined.common.api import Session
from determined.master.rm.sandbox import sandbox_problem

from ._server import server_db_url, wait_for
from .test_run_as_sandbox import accounts  # noqa: F401 (fixture: OS accounts)
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


@pytest.fixture(scope="module")
def task_server(accounts: Dict[str, Any]) -> Iterator[Dict[str, Any]]:  # noqa: F811 (fixture)
    """The master as root with a trial user, in a directory every account can pass through; alice and bob linked
    to their OS accounts, carol not. Shared by this module's tests."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="det-task-sandbox-", dir="/tmp"))
    os.chmod(root, 0o711)
    data_dir = root / "data"
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
        yield {"root": root, "data_dir": data_dir, "sessions": sessions}
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_linked_users_command_runs_as_her_account_in_a_sandbox_of_its_own(
        accounts: Dict[str, Any], task_server: Dict[str, Any], tmp_path: pathlib.Path) -> None:  # noqa: F811
    data_dir, sessions = task_server["data_dir"], task_server["sessions"]
    storage = data_dir / "checkpoints"
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


def _refused(session: Session, **config: Any) -> str:
    """The master's refusal of a command with this config, at submit (the test fails if it is accepted)."""
    from determined import errors

    with pytest.raises(errors.APIError) as refusal:
        _command(session, None, ["true"], {}, **config)
    assert refusal.value.status_code == 400, refusal.value
    return str(refusal.value)


def test_a_sandboxed_task_reads_its_bind_mounts_and_its_work_dir_is_checked_at_submit(
        accounts: Dict[str, Any], task_server: Dict[str, Any]) -> None:  # noqa: F811 (fixtures)
    root, data_dir, sessions = task_server["root"], task_server["data_dir"], task_server["sessions"]
    alice, bob = sessions["alice"], sessions["bob"]
    alice_name = accounts["alice_name"]
    # Alice's data, private to her account: read-only at one container path, writable at another.
    data = root / "alice-data"
    data.mkdir(mode=0o700)
    (data / "data.txt").write_text("alice's data\n")
    for entry, mode in ((data, 0o700), (data / "data.txt", 0o600)):
        os.chown(entry, *accounts["alice"])
        os.chmod(entry, mode)
    ro, rw = f"/mnt/det-task-ro-{os.getpid()}", f"/opt/det-task-rw-{os.getpid()}/data"
    assert not os.path.lexists(ro) and not os.path.lexists(os.path.dirname(rw))
    script = (f'echo "READ $(pwd) $(cat data.txt)"; '
              f'if echo ro >> {ro}/data.txt; then echo "RO WRITTEN"; else echo "RO REFUSED"; fi; '
              f'if echo rw >> {rw}/data.txt; then echo "RW WRITTEN"; else echo "RW REFUSED"; fi')
    task = _command(alice, None, ["sh", "-c", script], {}, work_dir=ro, bind_mounts=[
        {"host_path": str(data), "container_path": ro, "read_only": True},
        {"host_path": str(data), "container_path": rw}])
    ended = _ended(alice, task)
    logs = _logs(alice, task)
    assert ended["exitCode"] == 0, logs
    assert f"READ {ro} alice's data" in logs, logs  # work_dir inside the mount, the file read through it
    assert "RO REFUSED" in logs and "RW WRITTEN" in logs, logs  # read_only is what refuses the write
    assert (data / "data.txt").read_text() == "alice's data\nrw\n"
    assert not any("bind_mounts" in line for line in logs), logs  # no "nothing is mounted" note: it is
    assert not os.path.lexists(ro) and not os.path.lexists(os.path.dirname(rw))  # nothing made on the machine

    # Refused at submit, each with what to do instead.
    private = _refused(alice, work_dir="/tmp")
    assert "private to each task" in private and "bind_mounts" in private, private
    hidden = _refused(alice, work_dir=str(data_dir / "work"))
    assert "the sandbox hides" in hidden and str(data_dir) in hidden, hidden
    mount = [{"host_path": str(data), "container_path": ro}]
    missing = _refused(alice, work_dir=f"{ro}/nowhere", bind_mounts=mount)
    assert f"host path {data}/nowhere) does not exist" in missing and "create it" in missing, missing
    over = _refused(alice, bind_mounts=[{"host_path": str(data), "container_path": "/tmp"}])
    assert "bind_mounts[0].container_path: /tmp" in over, over
    platform = _refused(alice, bind_mounts=[{"host_path": str(data), "container_path": sys.prefix + "/data"}])
    assert "Python installation" in platform, platform
    relative = _refused(alice, bind_mounts=[{"host_path": "data", "container_path": "/mnt/x", "read_only": True}])
    assert "bind_mounts[0].host_path" in relative and "absolute" in relative, relative
    # A directory only bob's account may enter: refused for alice by her account's ids (the master, root, could
    # enter it), accepted for bob.
    bobs = root / "bob-only"
    bobs.mkdir(mode=0o700)
    os.chown(bobs, *accounts["bob"])
    mount = [{"host_path": str(bobs), "container_path": ro}]
    denied = _refused(alice, work_dir=ro, bind_mounts=mount)
    assert f"cannot be entered by {alice_name} (uid {accounts['alice'][0]}" in denied and "chmod" in denied, denied
    bob_task = _command(bob, None, ["sh", "-c", 'echo "BOB IN $(pwd)"'], {}, work_dir=ro, bind_mounts=mount)
    assert _ended(bob, bob_task)["exitCode"] == 0, _logs(bob, bob_task)
    assert f"BOB IN {ro}" in _logs(bob, bob_task)
