"""Slots made ready when the Ray resource manager starts: a 1-slot launch takes one wherever it is (still being
placed, or placed with its actor), a launch of another size has them removed first, they go when not taken in
time, and how many there are follows DET_RAY_WARM_SLOTS. No cluster: placement groups and actors are stand-ins,
and the node-side worker's `warm()` starts a real fork server here."""
import time
from typing import Any, List

import pytest

from determined import errors
from determined.master.rm import _ray_worker, ray as ray_rm


def _manager(total: int = 3) -> Any:
    rm: Any = object.__new__(ray_rm.RayResourceManager)
    rm._runs, rm._dead, rm._idle, rm._warming = {}, set(), [], []
    rm._placements, rm._disabled = {}, {}  # no resource pools of its own, no disabled node
    rm.trial_user, rm._storage_checks, rm._storage_bad = None, [], {}
    rm.slots = ray_rm.ClusterSlots(kind="cpu", total=total)
    rm.trial_host = None
    rm.released = []
    rm.made = 0

    def new_pg(run: Any) -> None:
        run.pg, run.state = f"pg{rm.made}", "pending"
        run.ready_ref = f"ready-{run.pg}"
        rm.made += 1

    rm._new_placement_group = new_pg
    rm._release = lambda pg, actors: rm.released.append(pg)
    return rm


def _launch(rm: Any, allocation_id: str, slots: int = 1) -> Any:
    return rm.launch(trial_id=1, experiment_id=1, allocation_id=allocation_id, token="t", slots_needed=slots,
                     master_url="http://master")


def test_a_one_slot_launch_takes_a_slot_still_being_placed() -> None:
    rm = _manager()
    rm._warm_up(2)
    assert [w.pg for w in rm._warming] == ["pg0", "pg1"] and rm.made == 2
    run = _launch(rm, "a1")
    # It continues where the warm slot was: the same placement group and the placement it waits for.
    assert (run.pg, run.ready_ref, run.state) == ("pg0", "ready-pg0", "pending")
    assert rm.made == 2 and [w.pg for w in rm._warming] == ["pg1"] and rm._runs == {"a1": run}
    assert not run.warming  # the run is a trial's


def test_a_one_slot_launch_takes_a_placed_slot_whose_actor_said_where_it_is() -> None:
    rm = _manager()
    rm._warm_up(1)
    entry = rm._warming[0]
    entry.state, entry.ready_ref = "placing", None
    entry.actors, entry.rank_nodes, entry.node_ips, entry.slots = ["actor"], ["n0"], ["10.0.0.1"], ["10.0.0.1/0"]
    entry.wheres = {0: {"ip": "10.0.0.1", "ports": [1, 2]}}
    rm._warmed(entry)
    assert not rm._warming and len(rm._idle) == 1 and rm._idle[0].made_ready
    started: List[Any] = []
    rm._start = lambda run, chief: started.append((run.allocation_id, chief["ip"]))
    run = _launch(rm, "a1")
    assert started == [("a1", "10.0.0.1")] and run.actors == ["actor"] and run.reused
    assert not rm._idle and rm.made == 1


def test_a_launch_of_another_size_removes_them_first_and_unplaced_ones_go_in_time() -> None:
    rm = _manager(total=4)
    rm._warm_up(3)
    run = _launch(rm, "a1", slots=2)
    assert rm.released == ["pg0", "pg1", "pg2"] and not rm._warming
    assert run.pg == "pg3" and run.state == "pending"

    rm = _manager()
    rm._warm_up(2)
    rm._warming[0].warm_until = time.monotonic() - 1
    rm._release_warming(expired_only=True)
    assert rm.released == ["pg0"] and [w.pg for w in rm._warming] == ["pg1"]
    rm._release_warming()  # kill_all
    assert rm.released == ["pg0", "pg1"] and not rm._warming


def test_how_many_follows_the_setting_and_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    rm = _manager(total=3)
    monkeypatch.delenv("DET_RAY_WARM_SLOTS", raising=False)
    assert rm._warm_count(None) == 3  # the cluster's slots, at most WARM_SLOTS
    assert _manager(total=20)._warm_count(None) == ray_rm.WARM_SLOTS
    monkeypatch.setenv("DET_RAY_WARM_SLOTS", "0")
    assert rm._warm_count(None) == 0
    monkeypatch.setenv("DET_RAY_WARM_SLOTS", "2")
    assert rm._warm_count(None) == 2
    assert rm._warm_count(1) == 1  # the manager's argument wins
    monkeypatch.setenv("DET_RAY_WARM_SLOTS", "many")
    with pytest.raises(errors.DeterminedError, match="DET_RAY_WARM_SLOTS: expected a number of slots"):
        rm._warm_count(None)
    with pytest.raises(errors.DeterminedError, match="warm_slots: expected a number"):
        rm._warm_count(-1)


def test_a_warmed_worker_forks_its_first_run_from_its_server(tmp_path: Any) -> None:
    worker = _ray_worker.RankWorker()
    try:
        assert worker.warm() is True
        server = worker._server
        assert worker.warm() is True and worker._server is server  # one server, however often it is asked
        command = ["python", "-m", "determined.exec.harness"]
        pid = worker.start(command, {"DET_ALLOCATION_ID": "a1", "DET_MASTER": "http://127.0.0.1:9"},
                           fork_server=True)["pid"]
        assert worker._proc is not None and worker._proc.pid == pid
        assert type(worker._proc).__name__ == "ForkedProcess"  # forked by the server, not a new interpreter
        worker.kill_group()
        deadline = time.monotonic() + 30
        code = None
        while code is None and time.monotonic() < deadline:
            _, code = worker.drain(1.0, "a1")
        assert code is not None
    finally:
        if worker._server is not None:
            worker._server.close()
