"""The whole master with real trial processes: a fake trial program (no torch) run by the local RM."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest

from determined import errors, master
from determined.common.api import Session
from determined.master.rm import Slots

from ._helpers import config, model_def, pass_fake_settings_to_trials, wait_for

FAKE_TRIAL = [sys.executable, str(pathlib.Path(__file__).with_name("fake_trial.py"))]


@pytest.fixture
def fake_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    path = tmp_path / "fake"
    path.mkdir()
    monkeypatch.setenv("FAKE_DIR", str(path))
    pass_fake_settings_to_trials(monkeypatch)
    return path


def start(data_dir: pathlib.Path, slots: int = 2, **kwargs: Any) -> master.EmbeddedMaster:
    return master.start(data_dir, slots=Slots(gpus=[], cpu_count=slots), trial_command=FAKE_TRIAL,
                        preemption_timeout=kwargs.pop("preemption_timeout", 20), **kwargs)


def create(session: Session, cfg: Dict[str, Any]) -> int:
    return int(session.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"])


def state(session: Session, exp_id: int) -> str:
    return str(session.get(f"/experiments/{exp_id}")["experiment"]["state"])


def trials(session: Session, exp_id: int) -> List[Dict[str, Any]]:
    return list(session.get(f"/experiments/{exp_id}")["trials"])


def training_steps(session: Session, trial_id: int) -> List[int]:
    return [m["steps_completed"] for m in session.get(f"/trials/{trial_id}")["training_metrics"]]


def test_experiment_of_several_trials_completes(tmp_path: pathlib.Path, fake_dir: pathlib.Path) -> None:
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=3, length=30))
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
        exp = s.get(f"/experiments/{exp_id}")
        assert exp["experiment"]["progress"] == 1.0 and exp["experiment"]["end_time"]
        assert exp["experiment"]["best_trial_id"] in [t["id"] for t in exp["trials"]]
        for t in exp["trials"]:
            assert t["state"] == "COMPLETED" and t["total_batches"] == 30 and t["restarts"] == 0
            assert training_steps(s, t["id"]) == [5, 10, 15, 20, 25, 30]
            assert t["latest_validation"]["loss"] == pytest.approx((t["hparams"]["x"] - 0.5) ** 2 + 1 / 30)
            wait_for(lambda: len(s.get(f"/trials/{t['id']}/logs")["logs"]) >= 2, message="logs")
            logs = s.get(f"/trials/{t['id']}/logs")["logs"]
            assert {"stdout", "stderr"} <= {line["stream"] for line in logs}
            assert any(f"fake trial {t['id']} starts at batch 0" in line["message"] for line in logs)
        assert len(s.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]) == 9
        assert not any((tmp_path / "data" / "work").iterdir())  # run dirs are removed


def test_sigkilled_trial_restarts_from_checkpoint_without_duplicated_metrics(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_HANG_AT", "25")
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=1, length=40))
        pid_file = fake_dir / "pid-1"
        wait_for(pid_file.exists, message="the trial to hang")
        assert training_steps(s, 1) == [5, 10, 15, 20, 25]
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
        trial = trials(s, exp_id)[0]
        assert trial["state"] == "COMPLETED" and trial["restarts"] == 1
        assert training_steps(s, 1) == [5, 10, 15, 20, 25, 30, 35, 40]
        logs = [line["message"] for line in s.get("/trials/1/logs")["logs"]]
        assert "fake trial 1 starts at batch 20" in logs  # resumed from the checkpoint at 20


def test_max_restarts_exhausted_errors_the_trial_and_the_experiment_goes_on(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CRASH_TRIAL", "1")
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=2, length=20, max_restarts=1))
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
        by_id = {t["id"]: t for t in trials(s, exp_id)}
        # Two runs, one restart: describe and the trial's logs tell the same count.
        assert by_id[1]["state"] == "ERROR" and by_id[1]["restarts"] == 1
        assert by_id[2]["state"] == "COMPLETED"
        wait_for(lambda: any("trial ended" in line["message"] for line in s.get("/trials/1/logs")["logs"]),
                 message="the end in trial 1's logs")
        logs = s.get("/trials/1/logs")["logs"]
        failures = [line["message"] for line in logs if line["message"].startswith("[master] run ") and " failed " in line["message"]]
        assert failures == [
            "[master] run 1 failed with exit code 3; restart 1 of 1 from the start (no checkpoint yet)",
            "[master] run 2 failed with exit code 3; no restart left (max_restarts 1)",
        ]
        assert sum("fake trial 1 starts" in line["message"] for line in logs) == 2
        assert training_steps(s, 1) == []  # nothing reported after the (absent) checkpoint is kept


def test_every_trial_errored_makes_the_experiment_error(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CRASH_TRIAL", "1")
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=1, length=20, max_restarts=0))
        wait_for(lambda: state(s, exp_id) == "ERROR", message="experiment ERROR")
        assert trials(s, exp_id)[0]["state"] == "ERROR"


def test_pause_checkpoints_and_exits_then_activate_resumes(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "0.1")
    monkeypatch.setenv("FAKE_CKPT_EVERY", "1000")  # only the preemption checkpoints
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=1, length=60))
        wait_for(lambda: training_steps(s, 1), message="training to start")
        assert s.post(f"/experiments/{exp_id}/pause")["experiment"]["state"] == "PAUSED"
        wait_for(lambda: not em.master.running_allocations(), message="the trial process to exit")
        trial = trials(s, exp_id)[0]
        assert trial["state"] == "PAUSED" and trial["restarts"] == 0
        assert trial["latest_checkpoint_uuid"] is not None and 0 < trial["total_batches"] < 60
        time.sleep(0.5)
        assert not em.master.running_allocations() and state(s, exp_id) == "PAUSED"
        s.post(f"/experiments/{exp_id}/activate")
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
        assert training_steps(s, 1) == list(range(5, 65, 5))
        starts = [line for line in (fake_dir / "events.log").read_text().splitlines() if line.startswith("start")]
        assert len(starts) == 2


def test_kill_experiment_kills_processes(tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "0.2")
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=2, length=500))
        wait_for(lambda: training_steps(s, 1) and training_steps(s, 2), message="two training trials")
        assert len(em.master.running_allocations()) == 2
        s.post(f"/experiments/{exp_id}/kill")
        wait_for(lambda: state(s, exp_id) == "CANCELED", timeout=10, message="experiment CANCELED")
        assert not em.master.running_allocations()
        assert {t["state"] for t in trials(s, exp_id)} == {"CANCELED"}
        events = (fake_dir / "events.log").read_text().splitlines()
        assert len([e for e in events if e.startswith("start")]) == 2
        assert [e for e in events if e.startswith("end")] == []  # killed, not exited


def test_max_concurrent_trials_is_respected(tmp_path: pathlib.Path, fake_dir: pathlib.Path) -> None:
    with start(tmp_path / "data", slots=4) as em:
        s = em.session()
        exp_id = create(s, config(max_trials=3, length=20, searcher={"max_concurrent_trials": 1}))
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
    spans: Dict[int, List[float]] = {}
    for line in (fake_dir / "events.log").read_text().splitlines():
        what, trial_id, at = line.split()
        spans.setdefault(int(trial_id), []).append(float(at))
    ordered = sorted(spans.values())
    assert len(ordered) == 3
    for (_, end), (start_next, _) in zip(ordered, ordered[1:]):
        assert end <= start_next


def test_master_stop_checkpoints_and_restart_resumes(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "0.1")
    monkeypatch.setenv("FAKE_CKPT_EVERY", "1000")
    data = tmp_path / "data"
    em = start(data)
    s = em.session()
    exp_id = create(s, config(max_trials=1, length=50))
    wait_for(lambda: training_steps(s, 1), message="training to start")
    em.stop(timeout=20)
    assert not (data / "master.lock").exists()
    assert master.running_master_url(data) is None
    offline = master.in_process_session(data)
    trial = offline.get("/trials/1")["trial"]
    assert trial["state"] == "ACTIVE" and trial["latest_checkpoint_uuid"] and trial["restarts"] == 0
    assert state(offline, exp_id) == "ACTIVE"
    with start(data) as em2:
        s2 = em2.session()
        wait_for(lambda: state(s2, exp_id) == "COMPLETED", message="experiment COMPLETED after restart")
        assert training_steps(s2, 1) == list(range(5, 55, 5))
        assert trials(s2, exp_id)[0]["restarts"] == 0


def test_lock_file_refuses_a_second_master_and_stale_locks_are_removed(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    with start(data) as em:
        lock = json.loads((data / "master.lock").read_text())
        assert lock == {"url": em.url, "pid": os.getpid()}
        assert master.running_master_url(data) == em.url
        with pytest.raises(errors.DeterminedError, match=em.url):
            start(data)
        assert em.session().get("/master/info")["url"] == em.url
    assert not (data / "master.lock").exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (data / "master.lock").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": int(dead.stdout)}))
    assert master.running_master_url(data) is None
    assert not (data / "master.lock").exists()
    (data / "master.lock").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": int(dead.stdout)}))
    with start(data) as em:
        assert master.running_master_url(data) == em.url


def test_kill_one_running_trial_and_the_experiment_goes_on(
    tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "0.05")
    with start(tmp_path / "data") as em:
        s = em.session()
        exp_id = create(s, config(max_trials=2, length=40))
        wait_for(lambda: training_steps(s, 1), message="trial 1 to train")
        s.post("/trials/1/kill")
        wait_for(lambda: state(s, exp_id) == "COMPLETED", message="experiment COMPLETED")
        by_id = {t["id"]: t for t in trials(s, exp_id)}
        assert by_id[1]["state"] == "CANCELED" and by_id[2]["state"] == "COMPLETED"
