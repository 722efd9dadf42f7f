"""Durability of `det master up`: SIGKILL of the master or of a trial, SIGTERM and resume; nothing lost or doubled."""
import pathlib
import signal
from typing import Any, Dict

import pytest

from tests.master._helpers import config, model_def

from ._server import ServerProcess, figures, records, searcher_journal, server_db_url, wait_for

LENGTH = 40
CHUNK = 5


def create(server: ServerProcess, max_trials: int = 3, **extra: Any) -> int:
    cfg = config(max_trials=max_trials, length=LENGTH, **extra)
    body = {"config": cfg, "model_definition": model_def()}
    return int(server.session().post("/experiments", body)["experiment"]["id"])


def describe(server: ServerProcess, exp_id: int) -> Dict[str, Any]:
    return server.session().get(f"/experiments/{exp_id}")  # type: ignore[no-any-return]


def completed(server: ServerProcess, exp_id: int) -> bool:
    state = describe(server, exp_id)["experiment"]["state"]
    assert state not in ("ERROR", "CANCELED"), state
    return state == "COMPLETED"


def trained_past_a_checkpoint(server: ServerProcess, exp_id: int) -> bool:
    """Some trial has a checkpoint and has trained beyond it: a failure now loses work."""
    for t in describe(server, exp_id)["trials"]:
        if t["state"] == "ACTIVE" and t["latest_checkpoint_uuid"] and t["total_batches"] % 20 >= 10:
            return True
    return False


def assert_search_went_on_as_if_nothing_happened(data_dir: pathlib.Path, db: Any, exp_id: int, max_trials: int) -> None:
    journal = searcher_journal(data_dir, db, exp_id)
    created = [e["request_id"] for e in journal if e["kind"] == "trial_created"]
    validated = [(e["request_id"], e["length"]) for e in journal if e["kind"] == "validation_completed"]
    closed = [e["request_id"] for e in journal if e["kind"] == "trial_closed"]
    assert len(created) == len(set(created)) == max_trials
    assert len(validated) == len(set(validated)) == max_trials, "each validation fed to the search method once"
    assert sorted(closed) == sorted(created)


@pytest.mark.slow
def test_sigkill_of_the_master_mid_experiment_loses_and_duplicates_nothing(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    db = server_db_url()
    server = ServerProcess(tmp_path / "data", db=db).start()
    try:
        second = ServerProcess(tmp_path / "data", db=db)
        with pytest.raises(AssertionError, match="another master"):
            second.start(timeout=60)
        exp_id = create(server, max_trials=2)
        wait_for(lambda: trained_past_a_checkpoint(server, exp_id), message="a trial past its checkpoint")
        assert server.signal(signal.SIGKILL) == -signal.SIGKILL
        before = records(tmp_path / "data", db, exp_id)

        server.start()  # the lock file of the dead master is taken over
        wait_for(lambda: completed(server, exp_id), 120, "the experiment to complete after the restart")
        after = records(tmp_path / "data", db, exp_id)
        numbers = figures(before, after, LENGTH, CHUNK)
        with capsys.disabled():
            print("\n" + numbers.line("kill the master (SIGKILL)"))
        assert numbers.batches_lost > 0, "the kill was meant to land between checkpoints"
        assert (numbers.metric_records_lost, numbers.metric_records_duplicated, numbers.checkpoints_lost) == (0, 0, 0)
        assert all(t.state == "COMPLETED" and t.restarts == 0 for t in after.values()), "the master's death is no trial failure"
        assert_search_went_on_as_if_nothing_happened(tmp_path / "data", db, exp_id, 2)
    finally:
        server.stop()


@pytest.mark.slow
def test_sigkill_of_a_trial_restarts_it_from_its_checkpoint(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    db = server_db_url()
    server = ServerProcess(tmp_path / "data", db=db).start()
    try:
        exp_id = create(server, max_trials=2)
        wait_for(lambda: trained_past_a_checkpoint(server, exp_id), message="a trial past its checkpoint")
        victim = next(t["id"] for t in describe(server, exp_id)["trials"]
                      if t["state"] == "ACTIVE" and t["latest_checkpoint_uuid"])
        pid = wait_for(lambda: server.trial_pids().get(victim), message=f"the process of trial {victim}")
        before = records(tmp_path / "data", db, exp_id)
        import os

        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: completed(server, exp_id), 120, "the experiment to complete")
        after = records(tmp_path / "data", db, exp_id)
        numbers = figures({victim: before[victim]}, after, LENGTH, CHUNK)
        with capsys.disabled():
            print("\n" + numbers.line("kill a trial (SIGKILL)"))
        assert (numbers.metric_records_lost, numbers.metric_records_duplicated, numbers.checkpoints_lost) == (0, 0, 0)
        assert after[victim].restarts == 1 and after[victim].state == "COMPLETED"
        assert_search_went_on_as_if_nothing_happened(tmp_path / "data", db, exp_id, 2)
    finally:
        server.stop()


@pytest.mark.slow
def test_sigterm_checkpoints_running_trials_and_the_next_master_resumes_them(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    db = server_db_url()
    server = ServerProcess(tmp_path / "data", db=db).start()
    try:
        exp_id = create(server, max_trials=2)
        wait_for(lambda: any(t["total_batches"] >= 10 for t in describe(server, exp_id)["trials"]),
                 message="training under way")
        assert server.signal(signal.SIGTERM) == 0, server.output()
        assert "Master stopped." in server.output()
        at_stop = records(tmp_path / "data", db, exp_id)
        running = [r for r in at_stop.values() if r.state == "ACTIVE" and r.reported_batches]
        assert running, at_stop
        for rec in running:  # the preempted trials checkpointed where they stopped: nothing to redo
            assert rec.latest_checkpoint_steps == rec.reported_batches, rec

        server.start()
        wait_for(lambda: completed(server, exp_id), 120, "the experiment to complete after the restart")
        after = records(tmp_path / "data", db, exp_id)
        numbers = figures(at_stop, after, LENGTH, CHUNK)
        with capsys.disabled():
            print("\n" + numbers.line("stop the master (SIGTERM)"))
        assert numbers == type(numbers)(0, 0, 0, 0)
        assert all(t.restarts == 0 for t in after.values())
    finally:
        server.stop()
