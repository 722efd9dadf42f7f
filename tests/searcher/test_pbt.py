import json
import math
from typing import Any, Dict, List, Optional

import pytest

from determined.config import InvalidExperimentConfig
from determined.searcher import Close, Create, ExitedReason, SearchContext, Shutdown, ValidateAfter
from determined.searcher._pbt import PBTSearch
from determined.searcher._simulate import SimulationResult, simulate

HPARAMS = {
    "lr": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "units": {"type": "int", "minval": 1, "maxval": 64},
    "wd": {"type": "log", "base": 10, "minval": -5, "maxval": -1},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
    "global_batch_size": {"type": "const", "val": 16},
}


def pbt(**overrides: Any) -> PBTSearch:
    config: Dict[str, Any] = {
        "name": "pbt", "metric": "loss", "population_size": 6, "num_rounds": 4,
        "length_per_round": {"batches": 10},
        "replace_function": {"truncate_fraction": 0.34},
        "explore_function": {"resample_probability": 0.0, "perturb_factor": 0.2},
    }
    for key, value in overrides.items():
        if key in ("truncate_fraction",):
            config["replace_function"] = {"truncate_fraction": value}
        elif key in ("resample_probability", "perturb_factor"):
            config["explore_function"] = {**config["explore_function"], key: value}
        else:
            config[key] = value
    return PBTSearch.from_config(config)


def lr_objective(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
    return hparams["lr"] + 1.0 / length


def metric_at(result: SimulationResult, length: int) -> Dict[str, float]:
    return {rid: dict(t.validations)[length] for rid, t in result.trials.items() if length in dict(t.validations)}


def live_counter(limit: int) -> Any:
    live = {"n": 0, "max": 0}

    def on_event(kind: str, args: Dict[str, Any]) -> None:
        live["n"] += {"trial_created": 1, "trial_closed": -1}.get(kind, 0)
        live["max"] = max(live["max"], live["n"])
        assert live["n"] <= limit, f"{live['n']} live trials at a {kind} event, more than the population {limit}"

    return live, on_event


# ---------------------------------------------------------------- hand-driven events


def test_round_end_closes_the_worst_then_clones_the_best_into_the_free_seat() -> None:
    m = pbt(population_size=4, num_rounds=3, truncate_fraction=0.25)
    ctx = SearchContext(0, HPARAMS)
    ops = m.initial_operations(ctx)
    a, b, c, d = [op.request_id for op in ops if isinstance(op, Create)]
    assert [type(op) for op in ops] == [Create, ValidateAfter] * 4
    assert all(op.length == 10 for op in ops if isinstance(op, ValidateAfter))
    assert all(op.checkpoint is None for op in ops if isinstance(op, Create))
    assert m.on_validation_completed(ctx, b, 0.2, 10) == []
    assert m.on_validation_completed(ctx, a, 0.1, 10) == []
    assert m.on_validation_completed(ctx, c, 0.3, 10) == []
    assert m.progress() == pytest.approx(30 / 120)
    # The round ends: d (worst) closes; b and c train on; a waits until its clone exists (its checkpoint stays
    # the one of the round); the clone waits for d's seat.
    assert m.on_validation_completed(ctx, d, 0.4, 10) == [Close(d), ValidateAfter(b, 20), ValidateAfter(c, 20)]
    assert m.progress() == pytest.approx(1 / 3)
    ops = m.on_trial_closed(ctx, d)
    assert len(ops) == 3
    create, clone_train, parent_train = ops
    assert isinstance(create, Create) and create.checkpoint == {"request_id": a}
    assert clone_train == ValidateAfter(create.request_id, 20) and parent_train == ValidateAfter(a, 20)
    assert create.hparams["act"] == m.hparams[a]["act"] and create.hparams["global_batch_size"] == 16
    e = create.request_id
    for rid, metric in ((a, 0.05), (b, 0.5), (c, 0.15)):
        assert m.on_validation_completed(ctx, rid, metric, 20) == []
    ops = m.on_validation_completed(ctx, e, 0.1, 20)
    assert ops == [Close(b), ValidateAfter(e, 30), ValidateAfter(c, 30)]  # a is the parent now
    m.on_trial_closed(ctx, b)
    for rid in (a, c, e):
        m.on_validation_completed(ctx, rid, 0.3, 30)
    clone = m.created[-1]
    assert m.progress() == pytest.approx(110 / 120)
    assert m.on_validation_completed(ctx, clone, 0.3, 30) == [Close(a), Close(e), Close(c), Close(clone)]
    assert m.progress() == pytest.approx(1.0)
    for rid in (a, c, e):
        assert m.on_trial_closed(ctx, rid) == []
    assert m.on_trial_closed(ctx, clone) == [Shutdown(failure=False)]


def test_larger_is_better_closes_the_smallest() -> None:
    m = pbt(population_size=4, truncate_fraction=0.5, smaller_is_better=False)
    ctx = SearchContext(1, HPARAMS)
    ids = [op.request_id for op in m.initial_operations(ctx) if isinstance(op, Create)]
    ops: List[Any] = []
    for rid, metric in zip(ids, [0.9, 0.1, 0.5, 0.3]):
        ops = m.on_validation_completed(ctx, rid, metric, 10)
    assert [op for op in ops if isinstance(op, Close)] == [Close(ids[3]), Close(ids[1])]
    ops = m.on_trial_closed(ctx, ids[3]) + m.on_trial_closed(ctx, ids[1])
    assert [op.checkpoint for op in ops if isinstance(op, Create)] == [{"request_id": ids[0]}, {"request_id": ids[2]}]


def test_describe_and_config_errors() -> None:
    assert pbt().describe() == {"name": "pbt", "unit": "batches", "population_size": 6, "num_rounds": 4,
                                "length_per_round": 10, "replaced_per_round": 2, "trials": 12, "total_length": 240}
    assert pbt(length_per_round={"epochs": 2}).unit == "epochs"
    with pytest.raises(InvalidExperimentConfig, match="truncate_fraction"):
        pbt(truncate_fraction=0.6)
    with pytest.raises(InvalidExperimentConfig, match="population_size"):
        pbt(population_size=0)
    with pytest.raises(ValueError, match="searcher.perturb_factor|explore_function.perturb_factor"):
        PBTSearch(4, 2, 10, 0.25, 0.1, 1.5)


# ---------------------------------------------------------------- simulations


@pytest.mark.parametrize("smaller_is_better", [True, False])
def test_rounds_truncation_and_clones_of_the_best(smaller_is_better: bool) -> None:
    m = pbt(smaller_is_better=smaller_is_better)
    live, on_event = live_counter(6)
    progress: List[float] = []

    def hook(kind: str, args: Dict[str, Any]) -> None:
        on_event(kind, args)
        progress.append(m.progress())

    result = simulate(m, HPARAMS, lr_objective, seed=4, on_event=hook)
    assert result.shutdown and not result.failure and live["max"] == 6
    assert len(result.trials) == 6 + 2 * 3
    assert result.total_length == 6 * 4 * 10
    assert progress == sorted(progress) and m.progress() == 1.0
    sign = 1.0 if smaller_is_better else -1.0
    for round_ in range(1, 5):
        at = metric_at(result, 10 * round_)
        assert len(at) == 6  # the whole population reported every round
        ranked = sorted(at, key=lambda rid: sign * at[rid])
        if round_ < 4:
            nxt = metric_at(result, 10 * (round_ + 1))
            assert set(ranked[:4]) <= set(nxt)  # survivors train on; the worst 2 stop
            assert not set(ranked[4:]) & set(nxt)
            clones = [t for t in result.trials.values() if t.start_length == 10 * round_ and t.parent]
            assert sorted(t.parent for t in clones) == sorted(ranked[:2])  # one clone of each of the 2 best
    for t in result.trials.values():
        assert [length for length, _ in t.validations] == list(range(t.start_length + 10, t.length + 1, 10))
        if t.parent:
            assert t.start_length in dict(result.trials[t.parent].validations)


def test_clones_hold_explored_hparams_of_their_parent() -> None:
    result = simulate(pbt(perturb_factor=0.5), HPARAMS, lr_objective, seed=9)
    clones = [t for t in result.trials.values() if t.parent]
    assert clones
    changed = 0
    for t in clones:
        parent = result.trials[t.parent].hparams
        assert t.hparams["act"] == parent["act"] and t.hparams["global_batch_size"] == 16
        assert t.hparams["lr"] in (pytest.approx(min(parent["lr"] * 1.5, 1.0)), pytest.approx(parent["lr"] * 0.5))
        assert t.hparams["units"] in (min(math.ceil(parent["units"] * 1.5), 64), max(math.floor(parent["units"] * 0.5), 1))
        assert t.hparams["wd"] in (pytest.approx(min(parent["wd"] * 1.5, 0.1)),
                                   pytest.approx(max(parent["wd"] * 0.5, 1e-5)))
        changed += t.hparams != parent
    assert changed == len(clones)
    resampled = simulate(pbt(resample_probability=1.0), HPARAMS, lr_objective, seed=9)
    for t in resampled.trials.values():
        assert 0 <= t.hparams["lr"] <= 1 and 1 <= t.hparams["units"] <= 64 and 1e-5 <= t.hparams["wd"] <= 0.1
    for t in (t for t in resampled.trials.values() if t.parent):  # fresh draws, not perturbations
        parent_lr = resampled.trials[t.parent].hparams["lr"]
        assert t.hparams["lr"] not in (pytest.approx(parent_lr * 1.2), pytest.approx(parent_lr * 0.8))


def test_population_stays_bounded_with_limited_slots_and_exits() -> None:
    def exits(request_id: str, hparams: Dict[str, Any], length: int) -> Optional[ExitedReason]:
        return ExitedReason.ERRORED if length == 20 and hparams["units"] > 40 else None

    m = pbt(population_size=8, num_rounds=5, truncate_fraction=0.25)
    live, on_event = live_counter(8)
    result = simulate(m, HPARAMS, lr_objective, seed=2, max_concurrent=3, exit_early=exits, on_event=on_event)
    exited = [t for t in result.trials.values() if t.exited]
    assert exited and result.shutdown and not result.failure
    assert all(t.length == 20 for t in exited)
    assert len(metric_at(result, 50)) == 8  # exited members were replaced: a full population at the end
    for t in result.trials.values():
        if t.parent:
            assert not result.trials[t.parent].exited or result.trials[t.parent].length > t.start_length
    at_20 = metric_at(result, 20)
    assert all(t.request_id not in at_20 for t in exited)


def test_a_population_that_dies_out_fails() -> None:
    result = simulate(pbt(), HPARAMS, lr_objective, seed=0,
                      exit_early=lambda rid, hparams, length: ExitedReason.ERRORED if length >= 20 else None)
    assert result.shutdown and result.failure
    assert not metric_at(result, 20)


def test_same_seed_same_run_and_snapshot_at_every_event_continues_identically() -> None:
    def exits(request_id: str, hparams: Dict[str, Any], length: int) -> Optional[ExitedReason]:
        return ExitedReason.ERRORED if length == 30 and hparams["act"] == "tanh" and hparams["lr"] > 0.3 else None

    def run(seed: int, snapshots: bool) -> SimulationResult:
        return simulate(pbt(population_size=7, num_rounds=6, resample_probability=0.3), HPARAMS, lr_objective,
                        seed=seed, max_concurrent=2, exit_early=exits, snapshot_every_event=snapshots)

    plain = run(11, False)
    assert any(t.exited for t in plain.trials.values())

    def summary(r: SimulationResult) -> List[Any]:
        return [(rid, t.hparams, t.parent, t.start_length, t.validations, t.exited) for rid, t in r.trials.items()]

    assert summary(run(11, False)) == summary(plain)
    assert summary(run(11, True)) == summary(plain)
    assert summary(run(12, False)) != summary(plain)


def test_snapshot_is_plain_json_with_string_keys() -> None:
    m = pbt()
    ctx = SearchContext(0, HPARAMS)
    ids = [op.request_id for op in m.initial_operations(ctx) if isinstance(op, Create)]
    for i, rid in enumerate(ids):
        m.on_validation_completed(ctx, rid, float("nan") if i == 0 else float(i), 10)
    text = json.dumps(m.snapshot(), allow_nan=False)
    fresh = pbt()
    fresh.restore(json.loads(text))
    assert fresh.snapshot() == m.snapshot() and fresh.progress() == m.progress()
    assert ids[0] in m.closing  # a metric that is not a number ranks last
