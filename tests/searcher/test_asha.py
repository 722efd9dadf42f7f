import json
import math
from typing import Any, Dict, List

import pytest

from determined import config as det_config
from determined import searcher
from determined.searcher import (
    ASHASearch,
    AsyncHalvingSearch,
    Close,
    Create,
    ExitedReason,
    SearchContext,
    Searcher,
    Shutdown,
    ValidateAfter,
    simulate,
)
from determined.searcher._asha import WORST_METRIC
from determined.searcher._halving import brackets_for_mode, effective_max_rungs, floor_log

HPARAMS = {"global_batch_size": {"type": "const", "val": 32}, "x": {"type": "double", "minval": 0.0, "maxval": 1.0}}


def canonical(searcher_config: Dict[str, Any], records_per_epoch: int = 0) -> Dict[str, Any]:
    raw = {"entrypoint": "model_def:T", "hyperparameters": HPARAMS, "searcher": {"metric": "loss", **searcher_config}}
    if records_per_epoch:
        raw["records_per_epoch"] = records_per_epoch
    return det_config.load_experiment_config(raw)


def asha(**fields: Any) -> ASHASearch:
    method = searcher.make_search_method(canonical({"name": "adaptive_asha", **fields}, records_per_epoch=1000)["searcher"])
    assert isinstance(method, ASHASearch)
    return method


def test_worked_example_epochs_32_sixteen_trials() -> None:
    method = asha(max_length={"epochs": 32}, max_trials=16)
    assert method.unit == "epochs"
    assert method.max_rungs == 3
    assert method.describe()["brackets"] == [
        {"rungs": 3, "trials": 12, "concurrency": 4, "rung_lengths": [2, 8, 32]},
        {"rungs": 2, "trials": 4, "concurrency": 4, "rung_lengths": [8, 32]},
    ]
    ops = method.initial_operations(SearchContext(0, HPARAMS))
    creates = [op for op in ops if isinstance(op, Create)]
    lengths = [op.length for op in ops if isinstance(op, ValidateAfter)]
    assert len(creates) == 8 and lengths == [2] * 4 + [8] * 4


def test_worked_example_6400_batches_512_trials_and_aggressive() -> None:
    method = asha(max_length={"batches": 6400}, max_trials=512)
    assert [(b["rungs"], b["trials"]) for b in method.describe()["brackets"]] == [(5, 363), (4, 112), (3, 37)]
    assert method.describe()["brackets"][0]["rung_lengths"] == [25, 100, 400, 1600, 6400]
    assert [b["concurrency"] for b in method.describe()["brackets"]] == [37, 37, 37]
    aggressive = asha(max_length={"batches": 6400}, max_trials=512, mode="aggressive")
    assert aggressive.describe()["brackets"] == [
        {"rungs": 5, "trials": 512, "concurrency": 512, "rung_lengths": [25, 100, 400, 1600, 6400]}
    ]


def test_logs_are_exact_where_floats_are_not() -> None:
    assert math.floor(math.log(1000, 10)) == 2  # the float error an integer loop avoids
    assert floor_log(1000, 10) == 3 and floor_log(64, 4) == 3 and floor_log(63, 4) == 2 and floor_log(1, 4) == 0
    assert floor_log(10, 2.5) == 2
    assert effective_max_rungs(5, 64, 1000, 4) == 4
    assert effective_max_rungs(5, 10_000, 16, 4) == 3
    assert effective_max_rungs(2, 10_000, 10_000, 4) == 2


def test_modes_bracket_rungs_and_concurrency_split() -> None:
    assert brackets_for_mode("standard", 5) == [5, 4, 3]
    assert brackets_for_mode("standard", 2) == [2, 1]
    assert brackets_for_mode("conservative", 3) == [3, 2, 1]
    assert brackets_for_mode("aggressive", 4) == [4]
    conservative = asha(max_length={"batches": 1000}, max_trials=100, mode="conservative", max_concurrent_trials=5)
    described = conservative.describe()["brackets"]
    assert [b["rungs"] for b in described] == [4, 3, 2, 1]
    assert [b["concurrency"] for b in described] == [2, 1, 1, 1]
    assert sum(b["trials"] for b in described) == 100
    override = asha(max_length={"batches": 1000}, max_trials=10, bracket_rungs=[2, 1])
    assert [b["rungs"] for b in override.describe()["brackets"]] == [2, 1]
    assert [b["rung_lengths"] for b in override.describe()["brackets"]] == [[250, 1000], [1000]]
    with pytest.raises(ValueError, match="3 brackets.*max_trials is 2"):
        asha(max_length={"batches": 1000}, max_trials=2, bracket_rungs=[3, 2, 1])


def drive(method: Any, ctx: SearchContext, ops: List[Any]) -> Dict[str, int]:
    """The ValidateAfter targets in `ops`, by request id."""
    return {op.request_id: op.length for op in ops if isinstance(op, ValidateAfter)}


def test_async_promotion_by_hand() -> None:
    # one bracket, 2 rungs (50, 100), divisor 2, 4 trials, 2 at a time
    method = AsyncHalvingSearch(num_rungs=2, max_length=100, max_trials=4, divisor=2, max_concurrent_trials=2)
    ctx = SearchContext(1, HPARAMS)
    ops = method.initial_operations(ctx)
    a, b = [op.request_id for op in ops if isinstance(op, Create)]
    assert drive(method, ctx, ops) == {a: 50, b: 50}
    # a reports: 1 result, floor(1/2) = 0 promoted -> a new trial instead
    ops = method.on_validation_completed(ctx, a, 0.5, 50)
    (c,) = [op.request_id for op in ops if isinstance(op, Create)]
    assert drive(method, ctx, ops) == {c: 50}
    # b reports worse: 2 results, top 1 deserves promotion -> the boundary trial a is promoted
    ops = method.on_validation_completed(ctx, b, 0.9, 50)
    assert ops == [ValidateAfter(a, 100)]
    # c reports best: 3 results, still 1 to promote, c is in the top 1 -> promoted at once
    ops = method.on_validation_completed(ctx, c, 0.1, 50)
    assert ops == [ValidateAfter(c, 100)]
    # a reports at the top rung: closed, and a fourth trial is created
    ops = method.on_validation_completed(ctx, a, 0.4, 100)
    assert ops[0] == Close(a)
    (d,) = [op.request_id for op in ops if isinstance(op, Create)]
    # d exits early: it counts as the worst; 4 results in rung 0 -> 2 promoted (a, c), nothing new;
    # all max_trials reported in rung 0 and rung 0 has no outstanding work -> b is closed (d exited: no Close)
    ops = method.on_trial_exited_early(ctx, d, ExitedReason.ERRORED)
    assert ops == [Close(b)]
    assert method.on_trial_closed(ctx, d) == []
    assert method.on_trial_closed(ctx, a) == []
    assert method.on_trial_closed(ctx, b) == []
    assert method.on_validation_completed(ctx, c, 0.05, 100) == [Close(c)]
    assert method.progress() < 1.0
    assert method.on_trial_closed(ctx, c) == [Shutdown()]
    assert method.progress() == 1.0


def test_larger_is_better_promotes_the_largest() -> None:
    method = AsyncHalvingSearch(num_rungs=2, max_length=100, max_trials=2, divisor=2, max_concurrent_trials=2,
                                smaller_is_better=False)
    ctx = SearchContext(1, HPARAMS)
    a, b = [op.request_id for op in method.initial_operations(ctx) if isinstance(op, Create)]
    assert method.on_validation_completed(ctx, a, 0.2, 50) == []
    ops = method.on_validation_completed(ctx, b, 0.9, 50)
    assert ValidateAfter(b, 100) in ops and Close(a) in ops


def test_promoted_trial_that_exited_counts_as_worst_in_the_next_rung() -> None:
    method = AsyncHalvingSearch(num_rungs=3, max_length=100, max_trials=2, divisor=2, max_concurrent_trials=2)
    ctx = SearchContext(1, HPARAMS)
    a, b = [op.request_id for op in method.initial_operations(ctx) if isinstance(op, Create)]
    assert method.on_validation_completed(ctx, a, 0.1, 25) == []
    ops = method.on_trial_exited_early(ctx, a, ExitedReason.USER_CANCELED)
    assert ops == []  # a had no work outstanding: its rung-0 result stands
    ops = method.on_validation_completed(ctx, b, 0.5, 25)
    # a (best) is promoted but has exited: it reports the worst in rung 1 at once; b is closed out
    assert ops == [Close(b)]
    bracket_rung1 = method.rungs[1]
    assert bracket_rung1 == [[a, WORST_METRIC, False]]


def test_snapshot_is_plain_json_and_restores_identically() -> None:
    cfg = canonical({"name": "adaptive_asha", "max_length": {"batches": 64}, "max_trials": 12, "divisor": 2})
    s1 = Searcher.from_config(cfg, seed=3)
    ops = s1.initial_operations()
    ids = [op.request_id for op in ops if isinstance(op, Create)]
    for i, rid in enumerate(ids):
        length = next(op.length for op in ops if isinstance(op, ValidateAfter) and op.request_id == rid)
        s1.validation_completed(rid, float(i % 3), length)
    snap = s1.snapshot()
    text = json.dumps(snap, allow_nan=False)
    s2 = Searcher.from_config(cfg, seed=99)
    s2.restore(json.loads(text))
    assert s2.snapshot() == snap
    ops1 = s1.trial_closed(ids[-1])
    ops2 = s2.trial_closed(ids[-1])
    assert ops1 == ops2

    def keys_are_str(value: Any) -> bool:
        if isinstance(value, dict):
            return all(isinstance(k, str) and keys_are_str(v) for k, v in value.items())
        if isinstance(value, list):
            return all(keys_are_str(v) for v in value)
        return value is None or isinstance(value, (str, int, float, bool))

    assert keys_are_str(snap)


def test_unknown_trial_is_a_clear_error() -> None:
    method = asha(max_length={"batches": 100}, max_trials=4)
    with pytest.raises(ValueError, match="unknown trial request nope"):
        method.on_validation_completed(SearchContext(0, HPARAMS), "nope", 1.0, 10)


def test_full_run_closes_every_trial_and_progress_reaches_one() -> None:
    method = asha(max_length={"batches": 256}, max_trials=40, divisor=2)
    seen: List[float] = []
    result = simulate(method, HPARAMS, lambda rid, hp, length, parent: hp["x"] / length, seed=5,
                      on_event=lambda kind, args: seen.append(method.progress()))
    assert result.shutdown and not result.failure
    assert len(result.trials) == 40 and all(t.closed for t in result.trials.values())
    assert all(0.0 <= p <= 1.0 for p in seen) and method.progress() == 1.0
    assert max(t.length for t in result.trials.values()) == 256
    # the best trial reached the top rung
    metric, best = result.best(smaller_is_better=True)
    assert result.trials[best].length == 256
