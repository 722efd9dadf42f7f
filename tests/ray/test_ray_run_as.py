"""Run-as users and the sandbox on a Ray node (issue 33): the node-side worker of the Ray resource manager, as
root, starts a run as its user's linked OS account inside the bubblewrap sandbox it builds on its node
(rm/sandbox.py). Alice's run, started while bob's runs, cannot open bob's checkpoint, the master's data dir or
database, nor bob's /tmp; it reads its own checkpoint; what it writes is hers and private. Also: the manager hands
each launch its account and sandbox, and a node that cannot isolate is named once. No cluster: the worker is the
real node-side code, in this process (the 2-node cluster scenario is tests/ray/test_ray_rm.py's)."""
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from determined.master.rm import _ray_worker, ray as ray_rm
from determined.master.rm.sandbox import STORAGE_DIR_MODE, RunRequest, sandbox_problem
from determined.master.rm.trial_env import TrialUser

pytest.importorskip("ray", reason="the Ray resource manager needs `pip install 'determined-revived[ray]'`")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or sandbox_problem() is not None,
                                reason="needs root (creates OS users) and bubblewrap")

ALICE = r'''
id -u; id -g
try() { if out=$(eval "$2" 2>&1); then echo "$1=ok:$out"; else echo "$1=refused:$out"; fi; }
try bob_checkpoint 'cat "$STORAGE/$BOB_UUID/weights"'
try read_db 'head -c 16 "$DATA_DIR/determined.db"'
try list_data_dir 'ls -A "$DATA_DIR" | tr "\n" " "'
try bob_tmp 'cat /tmp/bob-secret'
try bob_tmp_on_host 'cat /run/determined-ray/*/.tmp/bob-secret'
try own_checkpoint 'cat "$STORAGE/$ALICE_UUID/weights"'
mkdir "$STORAGE/$NEW_UUID" && echo alice > "$STORAGE/$NEW_UUID/weights" && echo wrote=ok
'''


def _useradd(name: str) -> Tuple[int, int]:
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                   check=True)
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="module")
def accounts() -> Iterator[Dict[str, TrialUser]]:
    names = {who: f"detray{who}{os.getpid()}" for who in ("default", "alice", "bob")}
    made: List[str] = []
    users: Dict[str, TrialUser] = {}
    try:
        for who, name in names.items():
            uid, gid = _useradd(name)
            made.append(name)
            users[who] = TrialUser(name, uid, gid, (gid,), "")
        yield users
    finally:
        for user in users.values():  # the spare homes the node-side worker made for them
            shutil.rmtree(os.path.join(_ray_worker.RUN_AS_ROOT, f".home-{user.uid}"), ignore_errors=True)
        for name in made:
            subprocess.run(["userdel", name], check=False)
            subprocess.run(["groupdel", name], check=False, capture_output=True)


def _link(user: TrialUser) -> Dict[str, Any]:
    return {"agent_uid": user.uid, "agent_gid": user.gid, "agent_user": user.name, "agent_group": user.name}


def _drain(worker: Any, run: str, until: Optional[str] = None, timeout: float = 60) -> Tuple[List[str], Optional[int]]:
    lines: List[str] = []
    code = None
    deadline = time.monotonic() + timeout
    while code is None and time.monotonic() < deadline:
        out, code = worker.drain(1.0, run)
        lines += [line for _, _, line in out]
        if until is not None and until in lines:
            break
    return lines, code


@needs_root
def test_alice_on_a_ray_node_runs_as_her_account_in_a_sandbox(accounts: Dict[str, TrialUser]) -> None:
    root = pathlib.Path(tempfile.mkdtemp(prefix="det-ray-runas-", dir="/tmp"))
    os.chmod(root, 0o711)
    data_dir, storage = root / "data", root / "data" / "checkpoints"
    storage.mkdir(parents=True)
    os.chmod(data_dir, 0o711)
    (data_dir / "determined.db").write_text("SQLite format 3 secrets")
    os.chmod(data_dir / "determined.db", 0o600)
    os.chmod(storage, STORAGE_DIR_MODE)
    alice, bob = accounts["alice"], accounts["bob"]
    uuids = {"bob": "b0b00000-0000-4000-8000-000000000001", "alice": "a11ce000-0000-4000-8000-000000000001",
             "new": "a11ce000-0000-4000-8000-000000000002"}
    for who, user in (("bob", bob), ("alice", alice)):
        ckpt = storage / uuids[who]
        ckpt.mkdir()
        (ckpt / "weights").write_text(f"{who}'s weights")
        for path in (ckpt, ckpt / "weights"):
            os.chown(path, user.uid, user.gid)
        os.chmod(ckpt, 0o700)
    paths = {"data_dir": str(data_dir), "storage_roots": [str(storage)], "hidden": []}
    workers = {who: _ray_worker.RankWorker() for who in ("bob", "alice")}
    try:
        bob_request = RunRequest(account=_link(bob), storage_dir=str(storage),
                                 experiment_checkpoints=frozenset({uuids["bob"]}))
        started = workers["bob"].start(["sh", "-c", "echo bob > /tmp/bob-secret; echo BOB READY; sleep 60"],
                                       {"DET_ALLOCATION_ID": "bob-run"},
                                       run_as={"request": bob_request, "default": accounts["default"], **paths})
        assert started["not_isolated"] is None
        lines, code = _drain(workers["bob"], "bob-run", until="BOB READY")
        assert "BOB READY" in lines and code is None, lines

        alice_request = RunRequest(account=_link(alice), storage_dir=str(storage),
                                   experiment_checkpoints=frozenset({uuids["alice"]}))
        env = {"DET_ALLOCATION_ID": "alice-run", "STORAGE": str(storage), "DATA_DIR": str(data_dir),
               "BOB_UUID": uuids["bob"], "ALICE_UUID": uuids["alice"], "NEW_UUID": uuids["new"]}
        started = workers["alice"].start(["sh", "-c", ALICE], env,
                                         run_as={"request": alice_request, "default": accounts["default"], **paths})
        assert started["not_isolated"] is None
        lines, code = _drain(workers["alice"], "alice-run")
        assert code == 0, lines
        assert lines[:2] == [str(alice.uid), str(alice.gid)], lines
        found = dict(line.split("=", 1) for line in lines[2:])
        for what in ("bob_checkpoint", "read_db", "bob_tmp", "bob_tmp_on_host"):
            assert found[what].startswith("refused:"), (what, found)
        # The data dir in her sandbox: an empty tmpfs with only what her run uses bound back.
        assert set(found["list_data_dir"].split(":", 1)[1].split()) <= {"checkpoints"}, found
        assert found["own_checkpoint"] == "ok:alice's weights" and found["wrote"] == "ok", found
        new = storage / uuids["new"]
        st = (new / "weights").stat()
        assert (st.st_uid, st.st_gid) == (alice.uid, alice.gid) and st.st_mode & 0o077 == 0
        assert new.stat().st_mode & 0o077 == 0
    finally:
        for worker in workers.values():
            worker.kill_group()
        shutil.rmtree(root, ignore_errors=True)
    # Each run's directory (its /tmp) went with it.
    assert not list(pathlib.Path(_ray_worker.RUN_AS_ROOT).glob("alice-run-*"))


def test_the_manager_hands_each_launch_its_account_and_names_a_node_that_cannot_isolate_once(
        caplog: pytest.LogCaptureFixture) -> None:
    rm: Any = object.__new__(ray_rm.RayResourceManager)
    rm._runs, rm._dead, rm._idle, rm._warming = {}, set(), [], []
    rm._placements, rm._disabled = {}, {}  # no resource pools of its own, no disabled node
    rm._storage_checks, rm._storage_bad, rm._isolation_said = [], {}, set()
    rm.slots = ray_rm.ClusterSlots(kind="cpu", total=2)
    rm.trial_host = None
    rm._new_placement_group = lambda run: setattr(run, "state", "pending")
    user = TrialUser("dettrial", 999, 999, (999,), "")
    rm.trial_user = user
    rm._sandbox_paths = {"data_dir": "/srv/det", "storage_roots": ["/srv/det/checkpoints"], "hidden": []}
    assert rm.runs_as_users
    request = RunRequest(account={"agent_uid": 1001, "agent_gid": 1001, "agent_user": "alice", "agent_group": "a"})
    run = rm.launch(trial_id=1, experiment_id=1, allocation_id="a1", token="t", slots_needed=1,
                    master_url="http://m", run=request)
    assert run.run_as == {"request": request, "default": user, "data_dir": "/srv/det",
                          "storage_roots": ["/srv/det/checkpoints"], "hidden": []}

    class _Actor:
        def __init__(self) -> None:
            self.start = self
            self.calls: List[Any] = []

        def remote(self, *args: Any, **kwargs: Any) -> str:
            self.calls.append((args, kwargs))
            return "ref"

    actor = _Actor()
    rm.trial_command, rm.prestart_command, rm.fork_server = ["python", "-m", "determined.exec.harness"], ["p"], True
    rm._start_call(run, actor, {})
    [(args, kwargs)] = actor.calls
    assert args[2] is None and kwargs["fork_server"] is False and kwargs["run_as"] is run.run_as  # started cold
    with caplog.at_level("WARNING", logger="determined.master"):
        for _ in range(2):
            rm._say_not_isolated("node1", "10.0.0.2", "bubblewrap is not installed")
    said = [r.getMessage() for r in caplog.records if "NOT ISOLATED ON RAY NODE" in r.getMessage()]
    assert said == ["TRIALS ARE NOT ISOLATED ON RAY NODE 10.0.0.2 (node id node1): bubblewrap is not installed; "
                    "see docs/auth.md"]
