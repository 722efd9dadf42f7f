"""Run-as users and a sandbox per trial (issue 33): on one server run as root with a trial user, alice's and bob's
trials run as their linked OS accounts (`PATCH /users/{name}` with `agent_user_group`), carol's (unlinked) as the
trial user, each in a bubblewrap sandbox (rm/sandbox.py). Alice's trial, started while bob's runs, cannot open bob's
checkpoint, the master's data dir or database, bob's /tmp or /proc/<pid>/environ, nor write the platform's Python;
its own checkpoint, its `source_checkpoint_uuid` (bob's, named by alice) and its bind mounts work; what each trial
writes belongs to its account; a double-forked setsid process dies with its trial; the run's /tmp is removed."""
import io
import json
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import tarfile
import tempfile
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from determined.common import context as det_context
from determined.common.api import Session
from determined.master.rm.sandbox import sandbox_problem

from ._server import server_db_url, wait_for
from .test_trial_isolation import IsolatedServer

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or sandbox_problem() is not None,
                                reason="needs root (creates OS users, runs the master as root) and bubblewrap")

BOB = r'''
import os, pathlib, sys, time
import determined as det

pathlib.Path("/tmp/bob-tmp-secret").write_text("bob's temporary file")
with det.core.init() as core:
    for op in core.searcher.operations():
        for text in ("bob-c1", "bob-c2"):
            with core.checkpoint.store_path({"steps_completed": op.length, "which": text}) as (path, _):
                (path / "weights").write_text(text)
        print("BOB WAITING", flush=True)
        for _ in range(1200):  # until the test says alice's trial is done (at most 2 minutes)
            if os.path.exists("/mnt/signals/go"):
                break
            time.sleep(0.1)
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
'''

ALICE = r'''
import json, os, subprocess, sys
import determined as det

found = {"uid": os.getuid(), "gid": os.getgid()}


def attempt(name, action):
    try:
        found[name] = action()
    except OSError as e:
        found[name] = type(e).__name__


def environ_holds(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return b"bob-env-secret" in f.read()


data_dir, storage = os.environ["DATA_DIR"], os.environ["STORAGE"]
attempt("bob_checkpoint", lambda: open(os.path.join(storage, os.environ["BOB_PRIVATE"], "weights")).read())
attempt("read_db", lambda: open(os.path.join(data_dir, "determined.db"), "rb").read(16).decode("latin-1"))
attempt("list_data_dir", lambda: os.listdir(data_dir))
attempt("bob_tmp", lambda: open("/tmp/bob-tmp-secret").read())
attempt("bob_environ", lambda: [environ_holds(p) for p in os.environ["BOB_PIDS"].split(",")])
def visible_holders():
    holders = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            holders += [pid] if environ_holds(pid) else []
        except OSError:  # its own sandbox's init, root's
            continue
    return holders


attempt("any_environ", visible_holders)
attempt("platform_read_only", lambda: bool(os.statvfs(sys.prefix).f_flag & os.ST_RDONLY))
attempt("write_platform", lambda: open(os.path.join(sys.prefix, "planted"), "w").close())
attempt("write_bind", lambda: open("/mnt/data/out.txt", "w").write("alice was here"))
attempt("read_ro_bind", lambda: open("/opt/det-test/ro-data/in.txt").read())
attempt("write_ro_bind", lambda: open("/opt/det-test/ro-data/planted", "w").close())
with open("/tmp/alice-big", "wb") as f:  # left behind: the run's /tmp goes with it
    f.write(b"x" * (4 << 20))
# A double-forked process in a session of its own: it must not outlive the trial.
subprocess.run(["setsid", "sh", "-c", f"sleep {os.environ['SLEEP_ARG']} </dev/null >/dev/null 2>&1 &"], check=True)

with det.core.init() as core:
    source = det.get_cluster_info().latest_checkpoint
    with core.checkpoint.restore_path(source) as path:
        found["source"] = (path / "weights").read_text()
    for op in core.searcher.operations():
        core.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 0.25})
        with core.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (path / "weights").write_text("alice")
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.25})
        op.report_completed(0.25)
print("ALICE " + json.dumps(found), flush=True)
'''

CAROL = r'''
import determined as det

with det.core.init() as core:
    for op in core.searcher.operations():
        with core.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (path / "weights").write_text("carol")
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
'''


def _useradd(name: str) -> Tuple[int, int]:
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                   check=True)
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="module")
def accounts() -> Iterator[Dict[str, Tuple[int, int]]]:
    """Three OS accounts: the trial user (the default) and alice's and bob's; removed after."""
    names = {who: f"det{who}{os.getpid()}" for who in ("default", "alice", "bob")}
    made: List[str] = []
    try:
        ids = {}
        for who, name in names.items():
            ids[who] = _useradd(name)
            made.append(name)
        yield {**ids, **{f"{who}_name": name for who, name in names.items()}}  # type: ignore[dict-item]
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False)
            subprocess.run(["groupdel", name], check=False, capture_output=True)


@pytest.fixture
def root_dir() -> Iterator[pathlib.Path]:
    """A place every account can pass through (pytest's own tmp dir is private to root)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="det-sandbox-", dir="/tmp"))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _config(script: str, env: Dict[str, str], **more: Any) -> Dict[str, Any]:
    searcher = {"name": "single", "metric": "loss", "max_length": {"batches": 1}, **more.pop("searcher", {})}
    return {"searcher": searcher, "hyperparameters": {"global_batch_size": 1}, "max_restarts": 0,
            "environment": {"environment_variables": [f"{k}={v}" for k, v in env.items()]},
            "internal": {"native": {"command": [script]}}, **more}


def _submit(session: Session, model_dir: pathlib.Path, config: Dict[str, Any]) -> int:
    package = det_context.pack_model_dir_b64(str(model_dir))
    return int(session.post("/experiments", {"config": config, "model_definition": package})["experiment"]["id"])


def _state(admin: Session, exp_id: int) -> str:
    return str(admin.get(f"/experiments/{exp_id}")["experiment"]["state"])


def _logs(admin: Session, exp_id: int) -> List[str]:
    trial_id = admin.get(f"/experiments/{exp_id}")["trials"][0]["id"]
    return [e["message"] for e in admin.get(f"/trials/{trial_id}/logs", {"limit": 1000})["logs"]]


def _checkpoints(admin: Session, exp_id: int) -> List[Dict[str, Any]]:
    return [c for c in admin.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"] if c["state"] == "COMPLETED"]


def _pids_holding(secret: bytes) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if secret in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _running(marker: bytes) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker in f.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_linked_users_trials_run_as_their_accounts_in_sandboxes(
        accounts: Dict[str, Any], root_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    data_dir = root_dir / "data"
    storage = data_dir / "checkpoints"
    signals, alice_data, alice_ro = root_dir / "signals", root_dir / "alice-data", root_dir / "alice-ro"
    for path, mode in ((signals, 0o755), (alice_data, 0o700), (alice_ro, 0o755)):
        path.mkdir()
        os.chmod(path, mode)
    os.chown(alice_data, *accounts["alice"])
    (alice_ro / "in.txt").write_text("read only input")
    server = IsolatedServer(data_dir, db=server_db_url(), fake=False, cpu_slots=3,
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
            linked = admin.patch(f"/users/{who}", {"agent_user_group": {
                "agent_uid": uid, "agent_gid": gid, "agent_user": name, "agent_group": name}})["user"]
            assert linked["agent_user_group"] == {"agent_uid": uid, "agent_gid": gid, "agent_user": name,
                                                  "agent_group": name}
        sessions = {who: Session(server.url, user=who) for who in ("alice", "bob", "carol")}
        models = {}
        for who, script in (("alice", ALICE), ("bob", BOB), ("carol", CAROL)):
            models[who] = tmp_path / who
            models[who].mkdir()
            (models[who] / f"{who}.py").write_text(script)

        bob_exp = _submit(sessions["bob"], models["bob"], _config("bob.py", {"BOB_SECRET": "bob-env-secret"},
                          bind_mounts=[{"host_path": str(signals), "container_path": "/mnt/signals",
                                        "read_only": True}]))
        carol_exp = _submit(sessions["carol"], models["carol"], _config("carol.py", {}))
        wait_for(lambda: len(_checkpoints(admin, bob_exp)) == 2 or _state(admin, bob_exp) != "ACTIVE", 120,
                 "bob's checkpoints")
        assert _state(admin, bob_exp) == "ACTIVE", _logs(admin, bob_exp)
        by_text = {c["metadata"]["which"]: c["uuid"] for c in _checkpoints(admin, bob_exp)}
        bob_pids = _pids_holding(b"bob-env-secret")
        assert bob_pids, "bob's trial is running"

        sleep_arg = f"876.{os.getpid()}"  # this run's: a process left by another run is not this one's
        alice_exp = _submit(sessions["alice"], models["alice"], _config(
            "alice.py", {"DATA_DIR": str(data_dir), "STORAGE": str(storage), "BOB_PRIVATE": by_text["bob-c2"],
                         "BOB_PIDS": ",".join(map(str, bob_pids)), "SLEEP_ARG": sleep_arg},
            searcher={"source_checkpoint_uuid": by_text["bob-c1"]},
            bind_mounts=[{"host_path": str(alice_data), "container_path": "/mnt/data"},
                         {"host_path": str(alice_ro), "container_path": "/opt/det-test/ro-data", "read_only": True}]))
        wait_for(lambda: _state(admin, alice_exp) in ("COMPLETED", "ERROR"), 120, "alice's trial")
        (signals / "go").write_text("")
        for exp_id in (bob_exp, carol_exp):
            wait_for(lambda: _state(admin, exp_id) in ("COMPLETED", "ERROR"), 120, "the other trials")
        lines = _logs(admin, alice_exp)
        assert _state(admin, alice_exp) == "COMPLETED", "\n".join(lines[-40:])
        [found] = [json.loads(line.split("ALICE ", 1)[1]) for line in lines if "ALICE {" in line]

        # Alice's trial ran as her account, and saw nothing of bob's, the master's or the platform's.
        assert (found["uid"], found["gid"]) == accounts["alice"], found
        for what in ("bob_checkpoint", "read_db", "bob_tmp", "bob_environ"):
            assert found[what] in ("PermissionError", "FileNotFoundError"), (what, found)
        assert found["any_environ"] == [], found
        assert set(found["list_data_dir"]) <= {"work", "tensorboard", "checkpoints"}, found  # what its run uses
        assert found["platform_read_only"] is True and found["write_platform"] in ("OSError", "PermissionError"), found
        # Its bind mounts, its source checkpoint (bob's, which alice named) and its own checkpoint worked.
        assert found["write_bind"] == len("alice was here") and found["read_ro_bind"] == "read only input", found
        assert found["write_ro_bind"] == "OSError", found  # EROFS
        assert (alice_data / "out.txt").stat().st_uid == accounts["alice"][0]
        assert found["source"] == "bob-c1", found

        # Files belong to the run's account, private to it; the unlinked user's to the trial user.
        for who, exp_id in (("alice", alice_exp), ("bob", bob_exp), ("carol", carol_exp)):
            assert _state(admin, exp_id) == "COMPLETED", _logs(admin, exp_id)[-30:]
            owner = accounts[who] if who != "carol" else accounts["default"]
            for checkpoint in _checkpoints(admin, exp_id):
                stored = storage / checkpoint["uuid"]
                for path in (stored, stored / "weights"):
                    st = path.stat()
                    assert (st.st_uid, st.st_gid) == owner and st.st_mode & 0o077 == 0, (who, path, oct(st.st_mode))
        events = list((data_dir / "tensorboard" / f"experiment_{alice_exp}").rglob("events.out.tfevents.*"))
        assert events and all(e.stat().st_uid == accounts["alice"][0] and e.stat().st_mode & 0o077 == 0
                              for e in events), events
        assert stat.S_IMODE(storage.stat().st_mode) == 0o1733
        # The master (root) still serves and deletes what the accounts wrote.
        [mine] = _checkpoints(admin, alice_exp)
        files = b"".join(sessions["alice"].stream(f"/checkpoints/{mine['uuid']}/files"))
        with tarfile.open(fileobj=io.BytesIO(files)) as tar:
            assert tar.extractfile("weights").read() == b"alice"  # type: ignore[union-attr]
        sessions["alice"].delete(f"/checkpoints/{mine['uuid']}")
        wait_for(lambda: not (storage / mine["uuid"]).exists(), 60, "the deletion of alice's checkpoint")

        # Nothing of the runs is left: no setsid grandchild, no run directory (its /tmp), nothing planted.
        assert _running(f"sleep\0{sleep_arg}".encode()) == []
        assert not list((data_dir / "work").glob("*/.tmp")), list((data_dir / "work").iterdir())
        assert not pathlib.Path("/tmp/alice-big").exists() and not pathlib.Path("/tmp/bob-tmp-secret").exists()
        assert not pathlib.Path("/opt/det-test").exists() and not pathlib.Path("/mnt/data").exists()  # host untouched
    finally:
        server.stop()
