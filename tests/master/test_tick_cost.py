"""What one scheduler tick costs the database when it records many ended runs and starts as many: the number of
SQL statements and commits is bounded per run and does not grow with the trials the experiment already has
(counted with SQLAlchemy's engine events, so the test cannot flake on a slow machine)."""
import base64
import pathlib
import threading
from typing import Any, Dict, Iterator, List, Mapping, Tuple

import pytest
from sqlalchemy import event, select

from determined.master.lifecycle import actions, protocol, states
from determined.master import master as master_module
from determined.master.db import Experiment, Trial
from determined.master.lifecycle.experiment import get_trial
from determined.master.master import Master
from determined.master.rm import Slots

from ._helpers import config, model_def

SLOTS = 16


class _Run:
    def __init__(self, trial_id: int, slots: int) -> None:
        self.trial_id = trial_id
        self.slots = [str(i) for i in range(slots)]


class _HeldRuns:
    """A resource manager whose runs only hold their slots until the test ends them (exit code 0)."""

    def __init__(self, slots: int) -> None:
        self.slots = Slots(gpus=[], cpu_count=slots)
        self.exit_listener: Any = None
        self.runs: Dict[str, _Run] = {}
        self.exited: List[Tuple[int, str, int]] = []
        self.lock = threading.Lock()

    @property
    def total_slots(self) -> int:
        return self.slots.total

    def free_slots(self) -> int:
        return self.slots.total - sum(len(r.slots) for r in self.runs.values())

    def running(self) -> Mapping[str, Any]:
        return dict(self.runs)

    def launch(self, *, trial_id: int, allocation_id: str, slots_needed: int, **_: Any) -> None:
        self.runs[allocation_id] = _Run(trial_id, slots_needed)

    def end(self, allocation_id: str) -> None:
        run = self.runs.pop(allocation_id)
        self.exited.append((run.trial_id, allocation_id, 0))

    def poll_exited(self) -> List[Tuple[int, str, int]]:
        out, self.exited = self.exited, []
        return out

    def preempt(self, allocation_id: str, timeout: float) -> None:
        self.end(allocation_id)

    def enforce_deadlines(self) -> None:
        pass

    def kill(self, allocation_id: str) -> None:
        self.end(allocation_id)

    def kill_all(self) -> None:
        for allocation_id in list(self.runs):
            self.end(allocation_id)


class _Counter:
    """Statements and commits the engine runs while `counting` is on."""

    def __init__(self, master: Master) -> None:
        self.statements = 0
        self.commits = 0
        self.counting = False
        self.engine = master.engine
        event.listen(self.engine, "before_cursor_execute", self._statement)
        event.listen(self.engine, "commit", self._commit)

    def _statement(self, *_: Any) -> None:
        if self.counting:
            self.statements += 1

    def _commit(self, *_: Any) -> None:
        if self.counting:
            self.commits += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._statement)
        event.remove(self.engine, "commit", self._commit)


@pytest.fixture
def master(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Master]:
    """A master (SQLite, or PostgreSQL with DET_TEST_DB=postgres) whose scheduler the test ticks by hand."""
    monkeypatch.setattr(master_module, "TICK_BUDGET_S", 600.0)  # one tick records and starts every run
    rm = _HeldRuns(SLOTS)
    m = Master(tmp_path / "data", run_scheduler=True, resource_manager=lambda _work, _sink: rm,
               url="http://127.0.0.1:1")
    try:
        yield m
    finally:
        m.stop(timeout=1)


def _finish_running_trials(m: Master) -> int:
    """Every running trial validates at its operation's length, completes it and its run exits 0 (as a trial
    process does, through the protocol functions of the master's routes)."""
    rm = m.rm
    assert isinstance(rm, _HeldRuns)
    runs = list(rm.runs.items())
    for allocation_id, run in runs:
        with m.write() as s:
            trial = get_trial(s, run.trial_id)
            op = protocol.next_operation(s, trial)
            protocol.report_validation(s, trial, {"steps_completed": op["length"],
                                                  "metrics": {"loss": 1.0 / (1 + run.trial_id)}})
            protocol.complete_operation(s, trial, {"length": op["length"], "metric": 1.0 / (1 + run.trial_id)})
        rm.end(allocation_id)
    return len(runs)


def test_a_tick_that_records_many_ended_runs_costs_a_bounded_number_of_statements(master: Master) -> None:
    with master.write() as s:
        cfg = actions.canonical_config(config(max_trials=SLOTS * 8, length=1), str(master.data_dir))
        exp_id = actions.create_experiment(s, cfg, base64.b64decode(model_def())).id
    master.tick()  # starts the first runs
    counter = _Counter(master)
    costs: List[Tuple[int, int, int]] = []  # per tick: (runs ended, statements, commits)
    try:
        for _ in range(6):
            ended = _finish_running_trials(master)
            counter.statements = counter.commits = 0
            counter.counting = True
            master.tick()
            counter.counting = False
            costs.append((ended, counter.statements, counter.commits))
    finally:
        counter.close()
    with master.read() as s:
        trials = [(t.state, t.allocation_id) for t in s.scalars(select(Trial).where(Trial.experiment_id == exp_id))]
        assert s.get(Experiment, exp_id).state == states.ACTIVE
    assert sum(state == states.COMPLETED for state, _ in trials) == 6 * SLOTS  # every ended run was recorded
    assert sum(allocation is not None for _, allocation in trials) == SLOTS  # and as many started in that tick
    assert all(ended == SLOTS for ended, _, _ in costs)
    # Each ended run is a handful of statements (its end, the search method's next trial and journal, the next
    # run's start); the end notes, the log volumes, the trials and experiments are read once per tick. Before
    # this bound, a tick of 16 ended runs and 16 starts ran 405 statements (25 per run), now about 13 per run.
    for ended, statements, commits in costs:
        assert statements <= 14 * ended + 30, costs
        # Commits: the runs' log lines (stored before their ends, so that whoever sees a trial ended reads all its
        # lines), the recorded ends, the starts, the master's notes; none per run.
        assert commits <= 4, costs
    # The later ticks, with five times as many ended trials in the experiment, cost the same.
    assert max(n for _, n, _ in costs[1:]) - min(n for _, n, _ in costs[1:]) <= 4, costs


def test_the_end_notes_of_many_trials_are_read_in_a_few_queries(master: Master) -> None:
    from determined.master.lifecycle import trial_notes

    with master.write() as s:
        cfg = actions.canonical_config(config(max_trials=SLOTS * 2, length=1), str(master.data_dir))
        exp_id = actions.create_experiment(s, cfg, base64.b64decode(model_def())).id
    master.tick()
    _finish_running_trials(master)
    master.tick()
    with master.read() as s:
        ended = sorted(s.scalars(select(Trial.id).where(Trial.experiment_id == exp_id,
                                                         Trial.state == states.COMPLETED)))
    assert len(ended) == SLOTS
    counter = _Counter(master)
    try:
        counter.counting = True
        with master.read() as s:
            notes = trial_notes.end_notes(s, ended)
        counter.counting = False
        with master.read() as s:  # what each trial's note says when it is read alone
            one_by_one = [trial_notes.end_notes(s, [trial_id])[0] for trial_id in ended]
    finally:
        counter.close()
    assert [n[0] for n in notes] == ended
    assert [n[2] for n in notes] == [n[2] for n in one_by_one]
    assert all(n[2] == "[master] trial ended: COMPLETED: trained the full length (1 batches)" for n in notes), notes
    assert counter.statements <= 6  # trials, experiment, operations, validations (+ BEGIN)


def test_every_trial_state_is_open_or_terminal() -> None:
    """The open trials of an experiment are asked as `state IN TRIAL_OPEN` (indexed), not `NOT IN TRIAL_TERMINAL`:
    the two sets must cover every state a trial is given, and not overlap."""
    given = {states.ACTIVE, states.PAUSED, states.STOPPING_KILLED, states.STOPPING_CANCELED, states.COMPLETED,
             states.CANCELED, states.ERROR}
    assert states.TRIAL_OPEN | states.TRIAL_TERMINAL == given
    assert not states.TRIAL_OPEN & states.TRIAL_TERMINAL


def test_an_ended_runs_lines_are_stored_before_its_end_is_recorded(master: Master,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever sees a trial's run ended (its state, its experiment COMPLETED) reads all the lines it wrote."""
    from determined.master.lifecycle import allocations
    from determined.master.db import TrialLog, utcnow

    with master.write() as s:
        cfg = actions.canonical_config(config(max_trials=1, length=1), str(master.data_dir))
        actions.create_experiment(s, cfg, base64.b64decode(model_def()))
    master.tick()  # starts the run
    assert master.log_writer is not None
    master.log_writer._stop.set()  # no flush on the writer's own clock: only the tick's
    rm = master.rm
    assert isinstance(rm, _HeldRuns)
    (allocation_id, run), = rm.runs.items()
    master.log_writer.add(run.trial_id, utcnow(), "stdout", "the run's last line")
    stored_when_recorded: List[List[str]] = []
    process_exited = allocations.process_exited

    def recording(s: Any, trial_id: int, *args: Any, **kwargs: Any) -> Any:
        with master.read() as r:
            stored_when_recorded.append(list(r.scalars(select(TrialLog.message).where(TrialLog.trial_id == trial_id))))
        return process_exited(s, trial_id, *args, **kwargs)

    monkeypatch.setattr(allocations, "process_exited", recording)
    rm.end(allocation_id)
    master.tick()
    assert stored_when_recorded and "the run's last line" in stored_when_recorded[0]
