import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from determined.searcher import (
    ASHASearch,
    Close,
    Create,
    ExitedReason,
    RandomSearch,
    SearchContext,
    EngineSearchMethod,
    Shutdown,
    SimulationError,
    ValidateAfter,
    simulate,
)
from determined.searcher._ops import Operation

HPARAMS = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}


class Scripted(EngineSearchMethod):
    """A tiny method for the tests: trial `a` to 10, trial `b` to 5; then a clone of the first to report."""

    def __init__(self, clone_length: int = 15, close_all: bool = True) -> None:
        self.clone_length = clone_length
        self.close_all = close_all
        self.reported: List[str] = []
        self.closed: List[str] = []

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        return [Create("a", {"x": 1}), ValidateAfter("a", 10), Create("b", {"x": 2}), ValidateAfter("b", 5)]

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        self.reported.append(request_id)
        ops: List[Operation] = [Close(request_id)] if self.close_all else []
        if len(self.reported) == 1:
            ops += [Create("c", {"x": 3}, checkpoint={"request_id": request_id}), ValidateAfter("c", self.clone_length)]
        elif request_id == "c" and self.close_all:
            ops += [Close(r) for r in ("a", "b")]
        return ops

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self.closed.append(request_id)
        return [Shutdown()] if len(self.closed) == 3 else []

    def progress(self) -> float:
        return len(self.closed) / 3.0

    def snapshot(self) -> Dict[str, Any]:
        return {"reported": list(self.reported), "closed": list(self.closed)}

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.reported = list(snapshot["reported"])
        self.closed = list(snapshot["closed"])


def metric_of(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
    return float(hparams["x"]) * 100 + length


def test_events_in_master_order_and_shorter_work_reports_first() -> None:
    events: List[Tuple[str, Dict[str, Any]]] = []
    result = simulate(Scripted(), {}, metric_of, on_event=lambda kind, args: events.append((kind, args)))
    assert [kind for kind, _ in events][:3] == ["initial", "trial_created", "trial_created"]
    reports = [args["request_id"] for kind, args in events if kind == "validation_completed"]
    assert reports == ["b", "a", "c"]  # b (5 units) finishes before a (10 units)
    assert result.shutdown and not result.failure
    assert list(result.trials) == ["a", "b", "c"]
    c = result.trials["c"]
    assert c.parent == "b" and c.start_length == 5 and c.length == 15 and c.validations == [(15, 315.0)]
    assert result.total_length == 10 + 5 + (15 - 5)
    assert result.events == len(events)
    assert result.best(smaller_is_better=True) == (110.0, "a")
    assert result.best(smaller_is_better=False) == (315.0, "c")


def test_max_concurrent_gives_slots_in_creation_order() -> None:
    events: List[Tuple[str, Dict[str, Any]]] = []
    simulate(Scripted(), {}, metric_of, max_concurrent=1, on_event=lambda kind, args: events.append((kind, args)))
    reports = [args["request_id"] for kind, args in events if kind == "validation_completed"]
    assert reports == ["a", "b", "c"]  # one slot: a runs first although b is shorter


def test_clone_asked_for_less_than_its_start_is_an_error() -> None:
    with pytest.raises(SimulationError, match="asked trial c to train to 3, less than the 5"):
        simulate(Scripted(clone_length=3), {}, metric_of)


def test_never_shutting_down_is_an_error() -> None:
    with pytest.raises(SimulationError, match="stopped giving work without shutting down: 3 open trials"):
        simulate(Scripted(close_all=False), {}, metric_of)
    with pytest.raises(SimulationError, match="max_events=4"):
        simulate(Scripted(), {}, metric_of, max_events=4)


class BadTarget(Scripted):
    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        return [Create("a", {}), ValidateAfter("zzz", 10)]


def test_unknown_trial_is_an_error() -> None:
    with pytest.raises(SimulationError, match="ValidateAfter names an unknown trial 'zzz'"):
        simulate(BadTarget(), {}, metric_of)


def test_exit_early_then_closed_and_counts_its_training() -> None:
    events: List[Tuple[str, Dict[str, Any]]] = []

    def exit_early(request_id: str, hparams: Dict[str, Any], length: int) -> Optional[ExitedReason]:
        return ExitedReason.ERRORED if request_id != "a" else None

    method = RandomSearch(max_length=20, max_trials=3)
    result = simulate(method, HPARAMS, lambda *a: 0.5, exit_early=exit_early,
                      on_event=lambda kind, args: events.append((kind, dict(args))))
    exited = [t for t in result.trials.values() if t.exited is not None]
    assert len(exited) == 3  # request ids are uuids: none is "a"
    assert all(t.closed and t.validations == [] and t.length == 20 for t in exited)
    kinds = [kind for kind, _ in events]
    first_exit = kinds.index("trial_exited_early")
    assert kinds[first_exit + 1] == "trial_closed"
    assert events[first_exit][1]["reason"] == "ERRORED"
    assert result.shutdown and result.total_length == 60
    with pytest.raises(ValueError, match="no validations"):
        result.best(True)


def test_snapshot_every_event_continues_identically() -> None:
    plain = simulate(Scripted(), {}, metric_of)
    round_tripped = simulate(Scripted(), {}, metric_of, snapshot_every_event=True)
    assert plain == round_tripped


def test_thousands_of_asha_trials_in_about_a_second() -> None:
    method = ASHASearch(max_length=6400, max_trials=2500, divisor=4)
    start = time.perf_counter()
    result = simulate(method, HPARAMS, lambda rid, hp, length, parent: hp["x"] / (1 + length), seed=1)
    elapsed = time.perf_counter() - start
    print(f"ASHA: {len(result.trials)} trials, {result.events} events simulated in {elapsed:.2f}s")
    assert result.shutdown and len(result.trials) == 2500
    assert all(t.closed for t in result.trials.values())
