"""The order of a tick's work when runs end: a run that ended cleanly frees its slot for a trial with work before
its end is recorded (the next trial starts while the end and the search method's answer to it are recorded); a run
that failed is recorded first, so that its trial's restart keeps its place."""
import base64
import pathlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import pytest
from sqlalchemy import select

from determined.master.lifecycle import actions, protocol, states
from determined.master.db import Trial
from determined.master.lifecycle.experiment import get_trial
from determined.master.master import Master
from determined.master.rm import Slots

from ._helpers import config, model_def


class _OneSlot:
    """One CPU slot; each launch notes which trials the database then shows running (allocation set)."""

    def __init__(self, master_ref: List[Master]) -> None:
        self.slots = Slots(gpus=[], cpu_count=1)
        self.exit_listener: Any = None
        self.runs: Dict[str, int] = {}
        self.exited: List[Tuple[int, str, int]] = []
        self.launches: List[Tuple[int, List[int]]] = []  # (trial launched, trials recorded running then)
        self._master = master_ref

    @property
    def total_slots(self) -> int:
        return self.slots.total

    def free_slots(self) -> int:
        return self.slots.total - len(self.runs)

    def running(self) -> Mapping[str, Any]:
        return {}

    def launch(self, *, trial_id: int, allocation_id: str, **_: Any) -> None:  # after its allocation's commit
        with self._master[0].read() as s:
            running = sorted(t.id for t in s.scalars(select(Trial).where(Trial.allocation_id.is_not(None))))
        self.launches.append((trial_id, running))
        self.runs[allocation_id] = trial_id

    def end(self, code: int) -> None:
        allocation_id, trial_id = next(iter(self.runs.items()))
        del self.runs[allocation_id]
        self.exited.append((trial_id, allocation_id, code))

    def poll_exited(self) -> List[Tuple[int, str, int]]:
        out, self.exited = self.exited, []
        return out

    def preempt(self, allocation_id: str, timeout: float) -> None:
        pass

    def enforce_deadlines(self) -> None:
        pass

    def kill_all(self) -> None:
        self.runs.clear()


@pytest.fixture
def master(tmp_path: pathlib.Path) -> Iterator[Master]:
    ref: List[Master] = []
    rm = _OneSlot(ref)
    m = Master(tmp_path / "data", run_scheduler=True, resource_manager=lambda _work, _sink: rm,
               url="http://127.0.0.1:1")
    ref.append(m)
    try:
        yield m
    finally:
        m.stop(timeout=1)


def _complete_running_trial(m: Master) -> int:
    (trial_id,) = m.rm.runs.values()  # type: ignore[union-attr]
    with m.write() as s:
        trial = get_trial(s, trial_id)
        op = protocol.next_operation(s, trial)
        protocol.report_validation(s, trial, {"steps_completed": op["length"], "metrics": {"loss": 0.5}})
        protocol.complete_operation(s, trial, {"length": op["length"], "metric": 0.5})
    return trial_id


def _states(m: Master) -> Dict[int, Tuple[str, Optional[str]]]:
    with m.read() as s:
        return {t.id: (t.state, t.allocation_id) for t in s.scalars(select(Trial))}


def test_a_clean_end_starts_the_next_trial_before_the_end_is_recorded(master: Master) -> None:
    with master.write() as s:
        cfg = actions.canonical_config(config(max_trials=3, length=1), str(master.data_dir))
        actions.create_experiment(s, cfg, base64.b64decode(model_def()))
    master.tick()
    first = _complete_running_trial(master)
    master.rm.end(0)  # type: ignore[union-attr]
    master.tick()
    launched, running_then = master.rm.launches[-1]  # type: ignore[union-attr]
    # the first run's end was not recorded yet when the next one started (the launch follows its allocation)
    assert launched != first and running_then == sorted([first, launched])
    assert _states(master)[first] == (states.COMPLETED, None)  # and it is, by the end of the same tick


def test_a_failed_run_is_recorded_before_anything_starts(master: Master) -> None:
    with master.write() as s:
        cfg = actions.canonical_config(config(max_trials=3, length=1), str(master.data_dir))
        actions.create_experiment(s, cfg, base64.b64decode(model_def()))
    master.tick()
    (first,) = master.rm.runs.values()  # type: ignore[union-attr]
    master.rm.end(1)  # type: ignore[union-attr]
    master.tick()
    launched, running_then = master.rm.launches[-1]  # type: ignore[union-attr]
    # its end was recorded first, and the trial's restart kept its place (the lowest id goes first)
    assert launched == first and running_then == [first]
