"""What a researcher reads about trials, with real trial processes (the fake trial program of the master tests):
progress that moves while a trial trains, true statuses with their reasons, true start and end times, and
trial logs that tell what happened (runs, validations, checkpoints, restarts, why it ended)."""
import datetime
import pathlib
from typing import Dict, List, Set

import pytest

from determined.common.api import Session

from ._helpers import config
from .test_local_master import create, fake_dir, start, wait_for  # noqa: F401  (fake_dir is a fixture)


def when(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def logs(session: Session, trial_id: int) -> List[str]:
    return [line["message"] for line in session.get(f"/trials/{trial_id}/logs", {"limit": 10000})["logs"]]


def test_progress_moves_while_a_single_trial_trains(tmp_path: pathlib.Path, fake_dir: pathlib.Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`single` stayed at 0 % until its trial ended; now it follows the batches trained."""
    monkeypatch.setenv("FAKE_CHUNK", "2")
    monkeypatch.setenv("FAKE_SLEEP", "0.25")
    with start(tmp_path / "data", slots=1) as em:
        s = em.session()
        cfg = config(length=24)
        cfg["searcher"] = {"name": "single", "metric": "loss", "max_length": {"batches": 24}}
        exp_id = create(s, cfg)
        seen: List[float] = []

        def moved_before_any_validation() -> bool:
            exp = s.get(f"/experiments/{exp_id}")
            trial = exp["trials"][0]
            if trial["latest_validation"] is None:
                seen.append(exp["experiment"]["progress"])
            return len({p for p in seen if p > 0}) >= 2

        wait_for(moved_before_any_validation, timeout=30, message="progress moving before the first validation")
        assert seen == sorted(seen) and 0 < seen[-1] < 1
        described = s.get(f"/experiments/{exp_id}")
        assert described["trials"][0]["status"] == "RUNNING"
        assert described["trials"][0]["status_reason"] == "training to 24 batches"
        wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] == "COMPLETED", timeout=30)
        assert s.get(f"/experiments/{exp_id}")["experiment"]["progress"] == 1.0


def test_asha_trials_show_what_they_wait_for_why_they_stopped_and_when(
        tmp_path: pathlib.Path, fake_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CHUNK", "2")
    monkeypatch.setenv("FAKE_SLEEP", "0.05")
    monkeypatch.setenv("FAKE_CRASH_TRIAL", "4")  # trial 4 fails on every run: one restart, then ERROR
    cfg = config(length=8, max_restarts=1)
    cfg["searcher"] = {"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 8}, "max_trials": 4,
                       "divisor": 2, "max_rungs": 2, "mode": "aggressive"}
    with start(tmp_path / "data", slots=1) as em:
        s = em.session()
        exp_id = create(s, cfg)
        seen: Dict[int, Set[str]] = {}
        reasons: Dict[str, str] = {}

        def watch() -> bool:
            described = s.get(f"/experiments/{exp_id}")
            for t in described["trials"]:
                seen.setdefault(t["id"], set()).add(t["status"])
                reasons.setdefault(t["status"], t["status_reason"])
            return described["experiment"]["state"] == "COMPLETED"

        wait_for(watch, timeout=90, message="the ASHA experiment to complete")
        described = s.get(f"/experiments/{exp_id}")
        exp, trials = described["experiment"], {t["id"]: t for t in described["trials"]}
        assert exp["progress"] == 1.0
        # one slot for four trials: the others queue, and a trial waiting for its promotion says so
        assert "QUEUED" in set().union(*seen.values()) and reasons["QUEUED"].startswith("waiting for a slot")
        assert "RUNNING" in set().union(*seen.values())
        assert "WAITING" in set().union(*seen.values()) and reasons["WAITING"].startswith("waiting for promotion: "
                                                                                           "reported loss ")
        final = {tid: t["status"] for tid, t in trials.items()}
        assert final[4] == "ERROR" and "failed 2 times, more than max_restarts (1)" in trials[4]["status_reason"]
        stopped = [t for t in trials.values() if t["status"] == "STOPPED"]
        completed = [t for t in trials.values() if t["status"] == "COMPLETED"]
        # one slot: trials report in order 1, 2, 3 and 4 (failed, the worst), so two of four go on to rung 2
        assert len(completed) == 2 and {t["status_reason"] for t in completed} == {"trained the full length (8 batches)"}
        assert len(stopped) == 1
        for t in stopped:
            assert t["state"] == "COMPLETED" and t["total_batches"] == 4
            reason = t["status_reason"]
            assert reason.startswith("stopped by the searcher at rung 1 (4 batches): rung 1 promotes 1 of every 2 "
                                     "trials that reach it; 4 reached it and 2 were promoted"), reason
            assert "; its loss " in reason and " of 4; no more trials will reach the rung" in reason
        # times: a trial starts when its first run starts (one slot: one after the other), and a trial stopped
        # by the searcher ended when it finished its last operation, not when the searcher decided
        starts = sorted((when(t["start_time"]), tid) for tid, t in trials.items())
        assert when(exp["start_time"]) < starts[0][0] < starts[-1][0]
        assert len({start for start, _ in starts}) == 4
        for t in stopped:
            validated = s.get(f"/trials/{t['id']}")["validation_metrics"][-1]
            assert abs((when(t["end_time"]) - when(validated["end_time"])).total_seconds()) < 1.0
            assert when(t["end_time"]) < when(exp["end_time"])

        # the logs tell the story
        wait_for(lambda: any("trial ended" in line for line in logs(s, 4)), timeout=10, message="the end in the logs")
        crashed = logs(s, 4)
        assert "[master] run 1 starts at batch 0; it trains to 4 batches" in crashed
        assert any(line.startswith("[master] run 1 failed with exit code 3; restart 1 of 1 from") for line in crashed)
        assert any(line.startswith("[master] run 2 failed with exit code 3; no restart left (max_restarts 1)")
                   for line in crashed)
        assert crashed[-1].startswith("[master] trial ended: ERROR: failed 2 times")
        story = logs(s, stopped[0]["id"])
        validation = [line for line in story if line.startswith("[master] validation at batch 4: loss=")]
        checkpoint = [line for line in story if line.startswith("[master] checkpoint ")]
        assert len(validation) == 1 and checkpoint and " at batch 4: " in checkpoint[-1] and " UTC" in checkpoint[-1]
        ckpt_uuid = s.get(f"/trials/{stopped[0]['id']}")["checkpoints"][-1]["uuid"]
        assert any(ckpt_uuid in line for line in checkpoint)
        ended = [line for line in story if line.startswith("[master] trial ended: ")]
        assert ended == [f"[master] trial ended: STOPPED: {stopped[0]['status_reason']}"]
        assert "fake trial" in " ".join(story)  # the trial's own output is there too
