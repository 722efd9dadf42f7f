"""Unmanaged runs (0.38's core_v2) against a real `det master up` on 127.0.0.1: `python script.py` with DET_MASTER
set records an experiment owned by the logged-in user, its metrics and checkpoints; `det checkpoint download`
fetches the checkpoint; a second run with the same external ids continues the same trial; bad input is refused
with a clear error."""
import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

from determined.common.api import Session
from tests.auth._helpers import add_user

from ._server import ServerProcess, server_db_url

SCRIPT = pathlib.Path(__file__).parent.parent / "core" / "_core_v2_script.py"
DET = str(pathlib.Path(sys.executable).with_name("det"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    running = ServerProcess(tmp_path_factory.mktemp("unmanaged") / "data", db=server_db_url(), fake=False).start()
    try:
        admin = Session(running.url, user="admin")
        add_user(admin, "alice", "alice-pw")
        add_user(admin, "bob", "bob-pw")
        admin.close()
        yield running
    finally:
        running.stop()


def _run(server: ServerProcess, user: str, cwd: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "DET_MASTER": server.url, "DET_USER": user, **{f"CORE_V2_{k}": v for k, v in env.items()}}
    return subprocess.run([sys.executable, str(SCRIPT)], env=full, capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def _result(out: subprocess.CompletedProcess) -> Dict[str, Any]:
    assert "RESULT " in out.stdout, out.stderr
    return json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])  # type: ignore[no-any-return]


def _login(server: ServerProcess, user: str) -> Session:
    session = Session(server.url, user=user)
    session.login(user, f"{user}-pw")  # cached: the scripts and `det` below act as this user
    return session


def test_an_unmanaged_run_is_recorded_downloaded_and_continued(server: ServerProcess, tmp_path: pathlib.Path) -> None:
    alice = _login(server, "alice")
    first = _run(server, "alice", tmp_path, NAME="alice-unmanaged", EXPERIMENT="alice-exp", TRIAL="alice-trial")
    assert first.returncode == 0, first.stderr
    one = _result(first)
    assert one["start"] == 0 and one["last_loss"] < one["first_loss"] / 100 and one["trial_run_id"] == 1
    assert one["url"] == f"{server.url}/experiments/{one['experiment_id']}"
    exp = alice.get(f"/experiments/{one['experiment_id']}")["experiment"]
    assert exp["owner"] == "alice" and exp["unmanaged"] and exp["state"] == "COMPLETED"
    assert exp["config"]["hyperparameters"] == {} and exp["name"] == "alice-unmanaged"
    training = alice.get(f"/trials/{one['trial_id']}/metrics", params={"group": "training"})["metrics"]
    assert [m["steps_completed"] for m in training] == list(range(1, 21))

    env = {**os.environ, "DET_MASTER": server.url, "DET_USER": "alice"}
    listed = subprocess.run([DET, "experiment", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "alice-unmanaged" in listed.stdout, listed.stderr
    target = tmp_path / "downloaded"
    got = subprocess.run([DET, "checkpoint", "download", one["checkpoint"], "-o", str(target)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert json.loads((target / "state.json").read_text()) == {"w": one["w"], "step": 20}

    second = _run(server, "alice", tmp_path, NAME="alice-unmanaged", EXPERIMENT="alice-exp", TRIAL="alice-trial")
    assert second.returncode == 0, second.stderr
    two = _result(second)
    assert (two["experiment_id"], two["trial_id"], two["start"], two["trial_run_id"]) == (
        one["experiment_id"], one["trial_id"], 20, 2)
    training = alice.get(f"/trials/{one['trial_id']}/metrics", params={"group": "training"})["metrics"]
    assert [m["steps_completed"] for m in training] == list(range(1, 41))
    validation = alice.get(f"/trials/{one['trial_id']}/metrics", params={"group": "validation"})["metrics"]
    assert [m["steps_completed"] for m in validation] == [20, 40]
    assert alice.get(f"/experiments/{one['experiment_id']}")["experiment"]["num_trials"] == 1

    # The SDK sees it too.
    from determined.experimental import client

    sdk = client.Determined(master=server.url, user="alice")
    assert sdk.get_experiment(one["experiment_id"]).get_trials()[0].id == one["trial_id"]

    # Another user may not add runs to alice's experiment.
    _login(server, "bob")
    refused = _run(server, "bob", tmp_path, EXPERIMENT="alice-exp", TRIAL="alice-trial")
    assert refused.returncode != 0 and "refused the unmanaged experiment" in refused.stderr
    assert "Traceback" not in refused.stderr.split("DeterminedError")[-1]


def test_a_failing_run_ends_in_error_and_bad_input_is_refused_clearly(server: ServerProcess,
                                                                      tmp_path: pathlib.Path) -> None:
    alice = _login(server, "alice")
    failed = _run(server, "alice", tmp_path, NAME="alice-fails", FAIL="1")
    assert failed.returncode != 0 and "failing on purpose" in failed.stderr
    result = _result(failed)
    assert alice.get(f"/trials/{result['trial_id']}")["trial"]["state"] == "ERROR"
    assert alice.get(f"/experiments/{result['experiment_id']}")["experiment"]["state"] == "ERROR"

    unknown = _run(server, "alice", tmp_path, WORKSPACE="no-such-workspace", PROJECT="p")
    assert unknown.returncode != 0
    assert "refused the unmanaged experiment" in unknown.stderr and "no-such-workspace" in unknown.stderr

    nowhere = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                             env={**os.environ, "DET_MASTER": "http://127.0.0.1:9", "DET_USER": "alice"})
    assert nowhere.returncode != 0 and "cannot reach the master at http://127.0.0.1:9" in nowhere.stderr
