"""Which running trials give their slot back: only idle ones (no searcher operation left), and only while a
trial with work waits for a slot."""
import pathlib
import time
from typing import Iterator, Optional

import pytest
from sqlalchemy.orm import Session

from determined.master.scheduling import scheduler
from determined.master.lifecycle import states
from determined.master.db import default_db_url, make_engine, upgrade
from determined.master.db.models import Experiment, SearcherOperation, Trial


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    with Session(engine) as s:
        s.add(Experiment(id=1, state=states.ACTIVE, config={}, model_def=b""))
        s.flush()
        yield s
    engine.dispose()


def _trial(s: Session, trial_id: int, *, running: bool, open_ops: int) -> Trial:
    trial = Trial(id=trial_id, experiment_id=1, request_id=f"r{trial_id}", hparams={}, seed=0, state=states.ACTIVE,
                  allocation_id=f"alloc-{trial_id}" if running else None)
    s.add(trial)
    s.flush()
    s.add(SearcherOperation(trial_id=trial_id, length=1, length_batches=1, completed=True))
    for _ in range(open_ops):
        s.add(SearcherOperation(trial_id=trial_id, length=2, length_batches=2, completed=False))
    s.flush()
    return trial


def _ids(trials: "list[Trial]") -> "list[int]":
    return sorted(t.id for t in trials)


def test_an_idle_running_trial_is_released_for_a_waiting_trial_with_work(session: Session) -> None:
    _trial(session, 1, running=True, open_ops=0)   # waits for the search method (an ASHA promotion, say)
    _trial(session, 2, running=True, open_ops=1)   # busy
    _trial(session, 3, running=False, open_ops=1)  # has work, no slot
    assert _ids(scheduler.idle_trials(session)) == [1]
    released = scheduler.release_idle_trials(session)
    assert _ids(released) == [1] and released[0].preempt_requested
    assert scheduler.idle_trials(session) == []  # asked once: a preempting trial is not asked again


@pytest.mark.parametrize("waiting_ops", [None, 0])
def test_nobody_is_released_when_no_trial_with_work_waits(session: Session, waiting_ops: Optional[int]) -> None:
    _trial(session, 1, running=True, open_ops=0)
    if waiting_ops is not None:
        _trial(session, 2, running=False, open_ops=waiting_ops)  # waiting, but without work either
    assert scheduler.idle_trials(session) == []
    assert scheduler.release_idle_trials(session) == []


def test_busy_running_trials_are_never_released(session: Session) -> None:
    _trial(session, 1, running=True, open_ops=2)
    _trial(session, 2, running=False, open_ops=1)
    assert scheduler.idle_trials(session) == []


def test_a_waiting_trial_of_a_paused_experiment_does_not_count(session: Session) -> None:
    session.add(Experiment(id=2, state=states.PAUSED, config={}, model_def=b""))
    session.flush()
    _trial(session, 1, running=True, open_ops=0)
    waiting = _trial(session, 2, running=False, open_ops=1)
    waiting.experiment_id = 2
    session.flush()
    assert scheduler.idle_trials(session) == []


def test_resources_priority_gives_slots_to_the_smaller_number_first(session: Session) -> None:
    # Experiment 1 (no priority: 42) came first; experiment 2 asks for priority 10, experiment 3 for 60.
    session.add(Experiment(id=2, state=states.ACTIVE, config={"resources": {"priority": 10}}, model_def=b""))
    session.add(Experiment(id=3, state=states.ACTIVE, config={"resources": {"priority": 60}}, model_def=b""))
    session.flush()
    for trial_id, exp_id in ((1, 1), (2, 2), (3, 3), (4, 2)):
        session.add(Trial(id=trial_id, experiment_id=exp_id, request_id=f"r{trial_id}", hparams={}, seed=0,
                          state=states.ACTIVE))
        session.flush()
        session.add(SearcherOperation(trial_id=trial_id, length=2, length_batches=2, completed=False))
    session.flush()
    assert [t.id for t in scheduler.pick_trials(session, 1)] == [2]
    assert [t.id for t in scheduler.pick_trials(session, 3)] == [2, 4, 1]  # all of priority 10, then 42; 60 waits
    assert [t.id for t in scheduler.pick_trials(session, 4)] == [2, 4, 1, 3]


def test_trained_units_read_ended_trials_only_when_asked_and_stay_exact(session: Session) -> None:
    from determined.master.lifecycle.experiment import trained_units

    for trial_id, state, batches in [(1, states.ACTIVE, 10), (2, states.COMPLETED, 30), (3, states.PAUSED, 5),
                                     (4, states.ERROR, 7)]:
        session.add(Trial(id=trial_id, experiment_id=1, request_id=f"r{trial_id}", hparams={}, seed=0, state=state,
                          total_batches=batches))
    session.flush()
    exp = session.get(Experiment, 1)
    trained = trained_units(session, exp, "batches")
    assert dict(trained._known) == {"r1": 10.0, "r3": 5.0}  # the ended trials are not read up front
    assert trained.get("r2") == 30.0 and trained["r4"] == 7.0 and trained.get("r9", -1.0) == -1.0
    assert "r2" in trained and "r9" not in trained and bool(trained)
    assert dict(trained) == {"r1": 10.0, "r2": 30.0, "r3": 5.0, "r4": 7.0} and len(trained) == 4


class _EndedRuns:
    """A resource manager whose runs have all ended: what `Master._reap` polls."""

    def __init__(self, exits: "list[tuple[int, str, int]]") -> None:
        self.exits = exits

    def poll_exited(self) -> "list[tuple[int, str, int]]":
        out, self.exits = self.exits, []
        return out


def test_a_tick_past_its_budget_leaves_the_other_ended_runs_to_the_next_tick(tmp_path: pathlib.Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import select

    from determined.common.api import Session as ApiSession
    from determined.master.lifecycle import allocations
    from determined.master import create_app
    from determined.master import master as master_module
    from starlette.testclient import TestClient

    from ._helpers import config, model_def

    app = create_app(tmp_path / "data", run_scheduler=False)
    api = ApiSession("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")
    exp = api.post("/experiments", {"config": config(max_trials=3), "model_definition": model_def()})
    master = app.state.master
    with master.write() as s:
        runs = [(t.id, allocations.start_allocation(s, t)[0])
                for t in s.scalars(select(Trial).where(Trial.experiment_id == exp["experiment"]["id"]))]
    master.rm = _EndedRuns([(trial_id, allocation_id, 137) for trial_id, allocation_id in runs])

    def running() -> int:
        with master.read() as s:
            return len(list(s.scalars(select(Trial).where(Trial.allocation_id.is_not(None)))))

    spent = time.monotonic  # a tick whose budget is spent after one run: its deadline has passed
    master._wake.clear()
    master._reap(deadline=spent())
    assert master.exits_recorded == 1 and running() == 2 and master._wake.is_set()  # the next tick comes at once
    master._reap(deadline=spent())
    assert master.exits_recorded == 2 and running() == 1
    master._reap(master_stopping=True)  # a stopping master records every ended run, whatever the budget
    assert master.exits_recorded == 3 and running() == 0
    master.stop()


class _FreeSlots:
    """A resource manager with free CPU slots whose launches are only noted: what `Master._schedule` starts on."""

    def __init__(self, slots: int) -> None:
        from determined.master.rm import Slots

        self.slots = Slots(gpus=[], cpu_count=slots)
        self.launched: "list[int]" = []

    @property
    def total_slots(self) -> int:
        return self.slots.total

    def free_slots(self) -> int:
        return self.slots.total - len(self.launched)

    def running(self) -> "dict[str, object]":
        return {}

    def launch(self, *, trial_id: int, **_: object) -> None:
        self.launched.append(trial_id)


def test_a_tick_past_its_budget_starts_one_run_and_leaves_the_others_to_the_next_tick(tmp_path: pathlib.Path) -> None:
    from determined.common.api import Session as ApiSession
    from determined.master import create_app
    from starlette.testclient import TestClient

    from ._helpers import config, model_def

    app = create_app(tmp_path / "data", run_scheduler=False)
    api = ApiSession("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")
    api.post("/experiments", {"config": config(max_trials=3), "model_definition": model_def()})
    master = app.state.master
    master.rm, master.url = _FreeSlots(4), "http://127.0.0.1:1"
    master._wake.clear()
    master._schedule(deadline=time.monotonic())  # the tick's budget is spent: still one run starts
    assert len(master.rm.launched) == 1 and master._wake.is_set()  # the next tick comes at once
    master._schedule()  # no deadline: every trial with work that fits
    assert sorted(master.rm.launched) == sorted(set(master.rm.launched)) and len(master.rm.launched) == 3
    master.stop()
