"""Trial isolation on a server (issue 19, row 2): a trial's code cannot read or change the master's database or
data dir, nor read the master's environment, on one slot (a prestarted harness) and on two (the launcher)."""
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, Iterator, List

import pytest

from determined.common import context as det_context
from determined.common.api import Session

from ._server import ServerProcess, server_db_url, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                                reason="needs root: creates an OS user and runs the master as root")

ATTACK = r'''
import json, os, sys

import determined as det

data_dir, master_pid = os.environ["ATTACK_DATA_DIR"], int(os.environ["ATTACK_MASTER_PID"])
found = {"uid": os.getuid(), "rank": int(os.environ.get("RANK", "0"))}


def attempt(name, action):
    try:
        action()
        found[name] = "done"
    except OSError as e:
        found[name] = type(e).__name__


attempt("read_db", lambda: open(os.path.join(data_dir, "determined.db"), "rb").read(16))
attempt("write_db", lambda: open(os.path.join(data_dir, "determined.db"), "r+b").write(b"x"))
# In its sandbox (rm/sandbox.py) the data dir is an empty tmpfs with the run's own directories bound back: listing
# it shows nothing of the master's; without one, the data dir (0711) cannot be listed.
try:
    found["data_dir_listed"] = sorted(os.listdir(data_dir))
except OSError as e:
    found["data_dir_listed"] = type(e).__name__
attempt("create_in_data_dir", lambda: open(os.path.join(data_dir, "planted"), "w").close())
attempt("master_environ", lambda: open(f"/proc/{master_pid}/environ", "rb").read())
try:
    with open(f"/proc/{master_pid}/cmdline", "rb") as f:
        found["password_in_master_cmdline"] = b"db-secret" in f.read()
except FileNotFoundError:  # in its sandbox (rm/sandbox.py) a trial sees no process but its own
    found["password_in_master_cmdline"] = False
found["leaked_env"] = sorted(k for k, v in os.environ.items() if "master-env-secret" in v or "db-secret" in v)
print("ATTACK " + json.dumps(found), flush=True)

with det.core.init() as core:
    for op in core.searcher.operations():
        if core.distributed.rank == 0:
            with core.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
                (path / "weights").write_text("trained")
            core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
'''


class IsolatedServer(ServerProcess):
    """The master, as root; where this Python lives in root's private home (pyenv in /root), in a mount namespace
    whose /root lets other users through to that Python and nothing else (a trial user must run Python)."""

    def argv(self) -> List[str]:
        argv = super().argv()
        home = pathlib.Path(os.path.realpath(sys.executable)).parts
        if home[:2] != ("/", "root") or len(home) < 3:
            return argv
        kept, inner = f"/root/{home[2]}", " ".join(shlex.quote(a) for a in argv)
        hold = self.data_dir.parent / "ns-python"
        script = (f"set -e; mkdir -p {hold}; mount --bind {kept} {hold}; mount -t tmpfs -o mode=0755 tmpfs /root; "
                  f"mkdir {kept}; mount --bind {hold} {kept}; exec {inner}")
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


@pytest.fixture(scope="module")
def trial_user() -> Iterator[str]:
    name = f"dettrial{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def root_dir() -> Iterator[pathlib.Path]:
    """A place the trial user can pass through (pytest's own tmp dir is private to root)."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="det-isolation-", dir="/tmp"))
    os.chmod(path, 0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _config(data_dir: pathlib.Path, master_pid: int, slots: int) -> Dict[str, Any]:
    return {
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 2}},
        "hyperparameters": {"global_batch_size": 2},
        "resources": {"slots_per_trial": slots},
        "max_restarts": 0,
        "environment": {"environment_variables": [f"ATTACK_DATA_DIR={data_dir}", f"ATTACK_MASTER_PID={master_pid}"]},
        "internal": {"native": {"command": ["attack.py"]}},
    }


def test_trials_cannot_read_the_database_the_data_dir_or_the_masters_environment(
        trial_user: str, root_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    data_dir = root_dir / "data"
    db = server_db_url()
    if db:  # a password on the command line (the test server trusts any): every local user could read it (ps)
        db = db.replace("@", ":db-secret@", 1)
    server = IsolatedServer(data_dir, db=db, fake=False, cpu_slots=3,
                           env={"SOME_TOKEN": "master-env-secret", "DET_HARNESS_PRESTART": "1"},
                           args=["--trial-user", trial_user])
    server.start()
    try:
        assert "TRIALS ARE NOT ISOLATED" not in server.output()
        model_dir = tmp_path / "model"
        model_dir.mkdir()
        (model_dir / "attack.py").write_text(ATTACK)
        session = Session(server.url, user="admin")
        package = det_context.pack_model_dir_b64(str(model_dir))
        experiments = {slots: session.post("/experiments", {"config": _config(data_dir, server.pid, slots),
                                                             "model_definition": package})["experiment"]["id"]
                       for slots in (1, 2)}  # at once: 3 slots
        found: List[Dict[str, Any]] = []
        for slots, exp_id in experiments.items():
            wait_for(lambda: session.get(f"/experiments/{exp_id}")["experiment"]["state"] in ("COMPLETED", "ERROR"),
                     120, f"the {slots}-slot trial")
            described = session.get(f"/experiments/{exp_id}")
            trial_id = described["trials"][0]["id"]
            lines = [e["message"] for e in session.get(f"/trials/{trial_id}/logs", {"limit": 1000})["logs"]]
            attacks = [json.loads(line.split("ATTACK ", 1)[1]) for line in lines if "ATTACK {" in line]
            assert described["experiment"]["state"] == "COMPLETED", "\n".join(lines[-30:])
            assert len(attacks) == slots, lines
            found += attacks
            [ckpt] = [c for c in session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
                      if c["state"] == "COMPLETED"]
            stored = data_dir / "checkpoints" / ckpt["uuid"] / "weights"
            assert stored.read_text() == "trained" and stored.stat().st_uid != 0, "written by the trial user"
            assert not [line for line in lines if "Permission denied" in line], lines
        uid = int(subprocess.run(["id", "-u", trial_user], capture_output=True, text=True, check=True).stdout)
        for attack in found:
            assert attack["uid"] == uid, attack
            assert (attack["data_dir_listed"] == "PermissionError"
                    or set(attack["data_dir_listed"]) <= {"work", "tensorboard", "checkpoints"}), attack
            for what in ("read_db", "write_db", "create_in_data_dir", "master_environ"):
                assert attack[what] in ("PermissionError", "FileNotFoundError"), (what, attack)
            assert attack["leaked_env"] == [] and attack["password_in_master_cmdline"] is False, attack
        assert not (data_dir / "planted").exists()
        assert oct((data_dir).stat().st_mode & 0o777) == "0o711"
        if not db:
            assert oct((data_dir / "determined.db").stat().st_mode & 0o777) == "0o600"
    finally:
        server.stop()
