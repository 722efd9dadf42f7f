"""`det agent disable` of the local machine with real Core API trials (gated_core_trial.py, two CPU slots): the
trials checkpoint through the preemption signal, give their slots up and wait in the queue; once the agent is
enabled they resume from those checkpoints, on the slots that are not disabled only (`det slot disable`)."""
import pathlib
import sys
from typing import Dict, Set

import pytest

from determined.master import embedded
from determined.master.rm import Slots
from tests.client._cli import cli_fails, det, det_json
from tests.master._helpers import model_def
from tests.scheduling.test_preemption_e2e import CORE_TRIAL, TERMINAL, Api, metrics_by_x, search, trials, wait


def test_a_disabled_agent_stops_its_trials_which_resume_on_its_enabled_slots(tmp_path: pathlib.Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    m = embedded.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=2), preemption_timeout=30,
                       trial_command=[sys.executable, str(CORE_TRIAL)])
    try:
        api = Api(m.url, "admin")
        monkeypatch.setenv("DET_MASTER", m.url)  # `det` talks to this master
        gate = tmp_path / "gate"  # the trials wait at batch 3 until it exists
        exp = api.post("/experiments", {"config": search(42, [0.2, 0.7], 6, str(gate), 3),
                                        "model_definition": model_def()})["experiment"]["id"]
        [agent] = api.get("/agents")["agents"]
        slots_of = f"/agents/{agent['id']}/slots"

        def held() -> Dict[str, int]:
            return {s["id"]: s["trial_id"] for s in api.get(slots_of)["slots"] if s["trial_id"] is not None}

        wait(lambda: len(held()) == 2 and {len(v) for v in metrics_by_x(api, exp).values()} == {3}, 60,
             "both trials at the gate, on both slots")
        cli_fails(det("slot", "disable", agent["id"], "1"), "only an admin", "'determined' is not an admin")
        assert det("-u", "admin", "slot", "disable", agent["id"], "1", check=True).stdout == (
            f"Disabled slot 1 of agent {agent['id']}; run {api.get(slots_of)['slots'][1]['allocation_id']} goes on "
            "there\n")
        assert len(held()) == 2  # `det slot disable`: the run holding the slot goes on

        stopped = det("-u", "admin", "agent", "disable", agent["id"], check=True).stdout
        assert f"Disabled agent {agent['id']} (disabled; 2 run(s) on it)" in stopped
        wait(lambda: not held() and api.get("/job-queues")["jobs"][0]["summary"]["state"] == "STATE_QUEUED", 60,
             "both trials checkpointed, stopped and queued")
        assert [(t["state"], t["restarts"]) for t in trials(api, exp)] == [("ACTIVE", 0), ("ACTIVE", 0)]
        gate.write_text("open")

        assert [(s["enabled"], s["draining"]) for s in det_json("slot", "list")] == [(False, False)] * 2
        cli_fails(det("-u", "admin", "agent", "enable"), "give the agent's id", "or --all")
        enabled = det("-u", "admin", "agent", "enable", "--all", check=True).stdout
        assert f"Enabled agent {agent['id']} (enabled;" in enabled
        seen: Set[str] = set()

        def ended() -> bool:
            seen.update(held())
            return api.get(f"/experiments/{exp}")["experiment"]["state"] in TERMINAL

        wait(ended, 90, "the experiment to end on slot 0")
        assert api.get(f"/experiments/{exp}")["experiment"]["state"] == "COMPLETED"
        assert seen <= {"0"}, seen  # slot 1 stayed disabled: no run got it
        for trial in trials(api, exp):
            logs = " ".join(line["message"] for line in api.get(f"/trials/{trial['id']}/logs", limit=10000)["logs"])
            assert "was disabled (`det agent disable`): it checkpoints" in logs
            assert "run 2 starts from checkpoint" in logs and "at batch 3" in logs, logs
            assert trial["restarts"] == 0
        # Each batch trained once: the runs after the agent came back went on from the checkpoints.
        assert [[s for s, _ in v] for v in metrics_by_x(api, exp).values()] == [list(range(1, 7))] * 2
    finally:
        m.stop(timeout=20)
