"""`det agent disable [--drain]|enable` and `det slot disable|enable` of the local resource manager's one agent (this
machine) through the routes (issue 32): anyone lists the agent and its slots, only an admin changes them (two users
and an admin, on SQLite and PostgreSQL). The resource manager is a local one with two CPU slots on which a stand-in
run holds slot 0 (no process starts; test_local_agents_e2e.py runs real trials)."""
import pathlib
import sys
import types
from typing import Any, Iterator, List

import pytest
from sqlalchemy import select

from determined import errors
from determined.master.db import Trial
from determined.master.rm import Slots
from determined.master.rm.local import LocalResourceManager, TrialProcess
from tests.auth._helpers import InProcessMaster, add_user, create_experiment


@pytest.fixture
def local(master: InProcessMaster, tmp_path: pathlib.Path) -> Iterator[LocalResourceManager]:
    rm = LocalResourceManager(str(tmp_path / "runs"), lambda *line: None, slots=Slots(gpus=[], cpu_count=2),
                              prestart=0, trial_command=[sys.executable, "-c", "pass"])
    master.master.rm = rm  # the master's resource manager from now on (no scheduler thread runs)
    yield rm
    master.master.rm = None


def _hold_slot_0(master: InProcessMaster, rm: LocalResourceManager, session: Any) -> int:
    """A trial of the user's whose (stand-in) run holds slot 0; its id."""
    exp = create_experiment(session, max_trials=1)
    with master.master.write() as s:
        trial = s.scalars(select(Trial).where(Trial.experiment_id == exp["id"])).one()
        trial.allocation_id = "run-on-slot-0"
        trial_id = trial.id
    popen: Any = types.SimpleNamespace(pid=0, poll=lambda: None)
    rm._processes["run-on-slot-0"] = TrialProcess(trial_id, "run-on-slot-0", popen, [0], str(rm.work_root), [])
    rm._used.add(0)
    return trial_id


def test_only_admins_disable_the_local_agent_whose_trials_then_checkpoint_and_wait(
        master: InProcessMaster, local: LocalResourceManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --drain the agent's trials are asked to checkpoint and give their slots up (preempt_requested), with a
    note why; with --drain they are left to finish. Either way no slot of it is free for a new run until it is
    enabled (the scheduler and `launch` take only `free_slot_ids`)."""
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    alice, bob = master.session("alice", "a-pw"), master.session("bob", "b-pw")
    trial_id = _hold_slot_0(master, local, alice)
    notes: List[Any] = []  # the trial notes the master would write into trial logs (its log writer runs with it)
    monkeypatch.setattr(master.master, "_log_notes", lambda new, ended: notes.extend(new))
    [agent] = bob.get("/agents")["agents"]
    assert (agent["id"], agent["enabled"], agent["draining"], agent["containers"]) == (local.agent_id, True, False, 1)
    assert local.free_slot_ids() == [1]
    for who in (alice, bob):
        for verb in ("disable", "enable"):
            with pytest.raises(errors.APIError) as info:
                who.post(f"/agents/{local.agent_id}/{verb}", {})
            assert info.value.status_code == 403 and "only an admin may enable or disable an agent" in str(info.value)
    assert local.agent.enabled and local.free_slot_ids() == [1]
    with pytest.raises(errors.APIError) as info:
        admin.post("/agents/not-this-machine/disable", {})
    assert info.value.status_code == 404 and local.agent_id in str(info.value) and "det agent list" in str(info.value)

    drained = admin.post(f"/agents/{local.agent_id}/disable", {"drain": True})["agent"]
    assert (drained["enabled"], drained["draining"]) == (False, True)
    assert local.free_slot_ids() == [] and local.free_slots() == 0  # nothing new starts on it
    assert master.master._zero_slot_room() == 0  # not even a trial of slots_per_trial: 0
    assert master.master._pool_capacity() == 0  # so a job of higher priority preempts none of its trials for it
    with master.master.read() as s:
        assert not s.get(Trial, trial_id).preempt_requested  # --drain: its run finishes there
    slots = bob.get(f"/agents/{local.agent_id}/slots")["slots"]
    assert [(x["enabled"], x["draining"], x["allocation_id"]) for x in slots] == [
        (False, True, "run-on-slot-0"), (False, True, None)]

    disabled = admin.post(f"/agents/{local.agent_id}/disable", {"agent_id": local.agent_id})["agent"]
    assert (disabled["enabled"], disabled["draining"]) == (False, False)
    with master.master.read() as s:
        assert s.get(Trial, trial_id).preempt_requested  # it checkpoints and gives its slot up
    assert [(t, text) for t, _, text in notes if "det agent disable" in text] == [(trial_id, (
        f"[master] its agent {local.agent_id} was disabled (`det agent disable`): it checkpoints and gives its slots "
        "up; it resumes from that checkpoint when an agent takes it"))]
    with pytest.raises(errors.APIError) as info:
        admin.post(f"/agents/{local.agent_id}/enable", {"drain": True})
    assert info.value.status_code == 400 and "disabling" in str(info.value)
    enabled = admin.post(f"/agents/{local.agent_id}/enable", {})["agent"]
    assert (enabled["enabled"], enabled["draining"]) == (True, False) and local.free_slot_ids() == [1]
    assert master.master._zero_slot_room() == 2


def test_only_admins_disable_a_slot_which_no_new_run_gets(master: InProcessMaster, local: LocalResourceManager,
                                                          tmp_path: pathlib.Path) -> None:
    """A disabled slot is given to no new run (the run holding it goes on, as Determined's `det slot disable`); it
    stays disabled when the agent is disabled and enabled again, until `det slot enable`."""
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    alice = master.session("alice", "a-pw")
    trial_id = _hold_slot_0(master, local, alice)
    with pytest.raises(errors.APIError) as info:
        alice.post(f"/agents/{local.agent_id}/slots/1/disable", {})
    assert info.value.status_code == 403 and "only an admin may enable or disable a slot" in str(info.value)
    for path, status, words in ((f"/agents/{local.agent_id}/slots/2/disable", 404, "its slots are 0 to 1"),
                                ("/agents/elsewhere/slots/1/disable", 404, local.agent_id)):
        with pytest.raises(errors.APIError) as info:
            admin.post(path, {})
        assert info.value.status_code == status and words in str(info.value)
    with pytest.raises(errors.APIError) as info:
        admin.post(f"/agents/{local.agent_id}/slots/1/disable", {"slot_id": 0})
    assert info.value.status_code == 400 and "not the slot of the path" in str(info.value)

    held = admin.post(f"/agents/{local.agent_id}/slots/0/disable", {})["slot"]
    assert (held["id"], held["enabled"], held["allocation_id"]) == ("0", False, "run-on-slot-0")
    with master.master.read() as s:
        assert not s.get(Trial, trial_id).preempt_requested  # the run holding it goes on
    assert master.master._pool_capacity() == 1
    slot = admin.post(f"/agents/{local.agent_id}/slots/1/disable", {})["slot"]
    assert (slot["id"], slot["enabled"], slot["allocation_id"]) == ("1", False, None)
    assert local.free_slot_ids() == [] and local.free_slots() == 0
    del local._processes["run-on-slot-0"]
    local._used.discard(0)  # the run ended: its slot is free, but disabled
    assert local.free_slot_ids() == []
    with pytest.raises(RuntimeError, match="only 0 are free"):
        local.launch(trial_id=trial_id, experiment_id=1, allocation_id="next", token="t", slots_needed=1,
                     master_url="http://master")
    admin.post(f"/agents/{local.agent_id}/disable", {})
    admin.post(f"/agents/{local.agent_id}/enable", {})
    assert local.free_slot_ids() == []  # the slots' own states outlive the agent's
    assert [x["enabled"] for x in alice.get(f"/agents/{local.agent_id}/slots")["slots"]] == [False, False]
    assert admin.post(f"/agents/{local.agent_id}/slots/1/enable", {})["slot"]["enabled"] is True
    assert local.free_slot_ids() == [1]


def test_no_task_starts_on_a_disabled_local_agent_or_slot(master: InProcessMaster, local: LocalResourceManager,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The task runner takes the slots the local resource manager offers (not held, not disabled), and while the
    agent is disabled it starts no task, CPU-only ones included: they wait in the queue."""
    from determined.master.db.models import Task
    from determined.master.tasks import states
    from determined.master.tasks.runner import TaskRunner

    runner = TaskRunner(master.master)
    started: List[Any] = []
    monkeypatch.setattr(runner, "_launch", lambda task_id, slot_ids: started.append((task_id, list(slot_ids))))
    _hold_slot_0(master, local, master.session("admin"))
    assert runner._free_slot_ids() == [1]
    local.agent.disable_slot(1)
    assert runner._free_slot_ids() == []
    local.agent.enable_slot(1)
    local.agent.disable(drain=True)
    with master.master.write() as s:
        s.add(Task(id="0123abcd", task_type=states.COMMAND, state=states.QUEUED, slots=0, config={}))
    runner._start_queued()
    assert started == []  # a disabled agent starts not even a CPU-only task
    local.agent.enable()
    runner._start_queued()
    assert started == [("0123abcd", [])]
