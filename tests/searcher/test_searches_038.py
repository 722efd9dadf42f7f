"""Determined 0.38's search semantics: trials that run their own loop (no max_length), the time-based ASHA that
stops trials, INVALID_HP replacements, and progress from report_progress."""
import json
from typing import Any, List, Optional

import pytest

from determined import config as det_config
from determined.searcher import Close, Create, ExitedReason, Searcher, Shutdown, ValidateAfter
from determined.searcher._asha_stopping import ASHAStoppingSearch, StoppingBracket
from determined.searcher._context import MIN_WINDOW

HPARAMS = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def searcher_of(capacity: Optional[int] = None, **search: Any) -> Searcher:
    raw = {"internal": {"native": {"command": ["train.py"]}}, "hyperparameters": HPARAMS,
           "searcher": {"metric": "loss", **search}}  # a script: its own loop decides its length
    return Searcher.from_config(det_config.load_experiment_config(raw), seed=3, capacity=capacity)


def created(ops: List[Any]) -> List[str]:
    return [op.request_id for op in ops if isinstance(op, Create)]


def roundtrip(s: Searcher) -> Searcher:
    """The same search restored from its JSON snapshot onto a fresh method (what a master restart does)."""
    snapshot = json.loads(json.dumps(s.snapshot()))
    fresh = Searcher(type(s.method).__new__(type(s.method)), s.context)
    fresh.method.__dict__.update(s.method.__dict__)
    fresh.restore(snapshot)
    return fresh


def test_random_without_max_length_gives_trials_no_operations_and_ends_when_they_exit() -> None:
    s = searcher_of(name="random", max_trials=3)
    ops = s.initial_operations()
    assert [type(op) for op in ops] == [Create] * 3
    ids = created(ops)
    for rid in ids:
        assert s.trial_created(rid) == []
    assert s.progress() == 0.0
    s.trial_progress(ids[0], 0.5)
    assert s.progress() == pytest.approx(0.5 / 3)
    assert s.validation_reported(ids[1], {"no searcher metric": 1}) == []  # random ignores what it is told
    assert s.trial_closed(ids[0]) == [] and s.trial_closed(ids[1]) == []
    assert s.progress() == pytest.approx(2 / 3)
    assert s.trial_closed(ids[2]) == [Shutdown()]


def test_random_replaces_an_invalid_hp_trial_without_counting_it() -> None:
    s = searcher_of(name="random", max_trials=2, max_length=50)
    ids = created(s.initial_operations())
    replacement = s.trial_exited_early(ids[0], ExitedReason.INVALID_HP)
    assert [type(op) for op in replacement] == [Create, ValidateAfter, Close]
    assert created(replacement)[0] not in ids
    assert s.trial_closed(ids[0]) == []
    s = roundtrip(s)
    assert s.progress() == 0.0  # the invalid trial does not count; two trials remain to do
    assert s.trial_closed(ids[1]) == []
    assert s.trial_closed(created(replacement)[0]) == [Shutdown()]
    # An early exit for another reason is not replaced, and single never replaces.
    s = searcher_of(name="random", max_trials=1)
    assert s.trial_exited_early(created(s.initial_operations())[0], ExitedReason.ERRORED) == []
    s = searcher_of(name="single")
    assert s.trial_exited_early(created(s.initial_operations())[0], ExitedReason.INVALID_HP) == []


def test_grid_without_max_length() -> None:
    raw = {"internal": {"native": {"command": ["train.py"]}}, "searcher": {"name": "grid", "metric": "loss"},
           "hyperparameters": {"x": {"type": "categorical", "vals": [1, 2]}}}
    s = Searcher.from_config(det_config.load_experiment_config(raw), seed=1)
    assert [type(op) for op in s.initial_operations()] == [Create, Create]


def asha(max_trials: int = 4, max_time: int = 16, divisor: float = 4, **extra: Any) -> Searcher:
    return searcher_of(name="adaptive_asha", max_trials=max_trials, time_metric="batches", max_time=max_time,
                       divisor=divisor, mode="aggressive", **extra)


def test_time_based_asha_builds_brackets_from_max_time() -> None:
    s = searcher_of(name="adaptive_asha", max_trials=16, time_metric="batches", max_time=1000)
    assert isinstance(s.method, ASHAStoppingSearch)
    assert s.method.describe() == {"max_rungs": 3, "brackets": [
        {"rungs": 3, "trials": 12, "concurrency": 4, "rung_lengths": [62, 250, 1000]},
        {"rungs": 2, "trials": 4, "concurrency": 4, "rung_lengths": [250, 1000]}]}
    assert len(created(s.initial_operations())) == 8


def test_time_based_asha_stops_losers_at_rungs_and_the_best_at_the_top() -> None:
    s = asha(max_trials=4, max_time=16, max_concurrent_trials=2, bracket_rungs=[3])  # rungs at 1, 4, 16 batches
    bracket = s.method.brackets[0]
    assert isinstance(bracket, StoppingBracket) and bracket.units_needed == [1, 4, 16]
    a, b = created(s.initial_operations())
    assert s.validation_reported(a, {"loss": 0.5, "batches": 0}) == []  # below the first rung: ignored
    assert s.validation_reported(a, {"loss": 0.5, "batches": 2}) == []  # best of rung 0: goes on; 2 < 4
    assert bracket.trial_rung[a] == 1
    stop_b = s.validation_reported(b, {"loss": 0.9, "batches": 1})  # second of two in rung 0: stopped
    assert stop_b[0] == Close(b) and len(created(stop_b)) == 1  # and replaced
    c = created(stop_b)[0]
    assert s.validation_reported(b, {"loss": 0.0, "batches": 5}) == []  # a stopped trial's reports are ignored
    # One report can pass several rungs: c is the best of rung 0 and the first in rung 1.
    ops = s.validation_reported(c, {"loss": 0.1, "batches": 4})
    assert ops == [] and bracket.trial_rung[c] == 2
    ops = s.validation_reported(a, {"loss": 0.4, "batches": 4})  # rung 1 now [c 0.1, a 0.4]: keep 1 -> stop a
    assert ops[0] == Close(a) and len(created(ops)) == 1
    d = created(ops)[0]
    assert s.validation_reported(c, {"loss": 0.05, "batches": 16}) == [Close(c)]  # top rung: done
    assert s.progress() == pytest.approx(3 / 4)
    # max_trials (4) are created: further stops create nothing
    assert created(s.validation_reported(d, {"loss": 9.0, "batches": 1})) == []
    s = roundtrip(s)
    for rid in (a, b, c):
        assert s.trial_closed(rid) == []
    assert s.trial_closed(d) == [Shutdown()]


def test_time_based_asha_metric_errors_stop_the_search() -> None:
    s = asha()
    a = created(s.initial_operations())[0]
    ops = s.validation_reported(a, {"loss": 0.3})
    assert len(ops) == 1 and isinstance(ops[0], Shutdown) and ops[0].failure
    assert "'batches'" in ops[0].message and "reported: loss" in ops[0].message
    s = asha()
    a = created(s.initial_operations())[0]
    assert s.validation_reported(a, {"loss": "bad", "batches": 3})[0].failure


def test_time_based_asha_replaces_invalid_hp_and_counts_other_exits_as_worst() -> None:
    s = asha(max_trials=2, max_time=4, divisor=2, max_concurrent_trials=2)
    a, b = created(s.initial_operations())
    s.validation_reported(a, {"loss": 1.0, "batches": 1})
    ops = s.trial_exited_early(a, ExitedReason.INVALID_HP)
    assert len(created(ops)) == 1  # replaced, not counted
    assert all(a not in [rid for rid, _ in rung] for rung in s.method.brackets[0].rungs)
    c = created(ops)[0]
    assert created(s.trial_exited_early(b, ExitedReason.ERRORED)) == []  # 2 counted trials exist already
    assert b in [rid for rid, _ in s.method.brackets[0].rungs[0]]
    for rid in (a, b, c):
        s.trial_closed(rid)
    assert s.method.shutdown


def test_promotion_asha_replaces_invalid_hp_trials() -> None:
    s = searcher_of(name="adaptive_asha", max_trials=2, max_length={"batches": 16}, mode="aggressive",
                    max_concurrent_trials=2, divisor=4)
    ops = s.initial_operations()
    a, b = created(ops)
    replacement = s.trial_exited_early(a, ExitedReason.INVALID_HP)
    assert len(created(replacement)) == 1 and isinstance(replacement[1], ValidateAfter)
    c = created(replacement)[0]
    assert s.trial_closed(a) == []
    s.validation_completed(b, 0.5, 1)
    s.validation_completed(c, 0.2, 1)
    assert s.method.brackets[0]._counted_trials() == 2


def test_single_with_time_metric_is_not_a_thing_but_async_halving_is() -> None:
    s = searcher_of(name="async_halving", num_rungs=2, max_trials=3, time_metric="epochs", max_time=8)
    assert isinstance(s.method, ASHAStoppingSearch) and s.method.brackets[0].units_needed == [2, 8]
    assert det_config.searcher_drives_trials({"name": "async_halving", "max_length": {"batches": 1}})
    assert not det_config.searcher_drives_trials({"name": "single", "max_length": None})


def test_json_of_every_038_operation() -> None:
    from determined.searcher import operation_from_dict, operation_to_dict

    op = Shutdown(failure=True, message="why")
    assert operation_from_dict(json.loads(json.dumps(operation_to_dict(op)))) == op
    assert operation_from_dict({"kind": "shutdown", "failure": False}) == Shutdown()  # journals of before


def test_on_the_platform_trials_of_own_loops_are_created_as_the_window_allows() -> None:
    """The platform's window (max_concurrent_trials here) holds back trials; they come as others end, and an
    INVALID_HP replacement waits for room too. The time-based ASHA's held-back first trials take the seats of trials
    that end without a stop."""
    s = searcher_of(name="random", max_trials=3, max_concurrent_trials=1, capacity=4)
    [first] = created(s.initial_operations())
    [second] = created(s.trial_exited_early(first, ExitedReason.INVALID_HP) + s.trial_closed(first))
    s = roundtrip(s)
    [third] = created(s.trial_closed(second))
    [fourth] = created(s.trial_closed(third))  # the replacement of the invalid one: 3 valid trials in all
    assert s.progress() == pytest.approx(2 / 3)
    assert s.trial_closed(fourth) == [Shutdown()] and s.progress() == 1.0
    s = asha(max_trials=40, capacity=4)  # one bracket running all 40 at once, but the platform's window is 16
    ids = created(s.initial_operations())
    assert len(ids) == MIN_WINDOW
    more = created(s.trial_closed(ids[0]))  # ended below the top rung without a stop: a held-back trial starts
    s = roundtrip(s)
    assert len(more) == 1 and len(created(s.trial_closed(ids[1]))) == 1


def test_invalid_hp_replacements_stop_at_the_trial_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """An experiment never holds more than MAX_TRIALS trials, even when every trial is invalid: past the limit an
    INVALID_HP exit is an ordinary early exit and the search ends."""
    from determined.searcher import _random
    from determined.searcher._context import MAX_TRIALS

    monkeypatch.setattr(_random, "MAX_TRIALS", 3)
    s = searcher_of(name="random", max_trials=2)
    a, b = created(s.initial_operations())
    [c] = created(s.trial_exited_early(a, ExitedReason.INVALID_HP))
    assert s.trial_exited_early(b, ExitedReason.INVALID_HP) == []
    assert s.trial_closed(a) == [] and s.trial_closed(b) == [] and s.trial_closed(c) == [Shutdown()]
    s = asha(max_trials=4)
    [bracket] = s.method.brackets
    assert bracket.max_created == MAX_TRIALS  # one bracket: the whole limit
    bracket.max_created = 4
    ids = created(s.initial_operations())
    assert len(ids) == 4 and s.trial_exited_early(ids[0], ExitedReason.INVALID_HP) == []
    assert [s.trial_closed(rid) for rid in ids][-1] == [Shutdown()]
