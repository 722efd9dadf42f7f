import json
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from determined.config import InvalidExperimentConfig
from determined.searcher import Close, Create, ExitedReason, SearchContext, Shutdown, ValidateAfter
from determined.searcher._adaptive import (
    AdaptiveSearch,
    AdaptiveSimpleSearch,
    SyncHalvingSearch,
    trials_for_budget,
)
from determined.searcher._halving import brackets_for_mode as mode_brackets
from determined.searcher._halving import effective_max_rungs, floor_log, rung_lengths
from determined.searcher._simulate import SimulationResult, simulate

HPARAMS = {
    "lr": {"type": "double", "minval": 0.0, "maxval": 1.0},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "global_batch_size": {"type": "const", "val": 8},
}


def lr_objective(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
    """Better (smaller) with more training and with a smaller lr; the ranking of trials is the same at every rung."""
    return hparams["lr"] + 1.0 / length


def brackets_of(method: Any) -> List[Dict[str, Any]]:
    return [{k: b[k] for k in ("rungs", "trials", "rung_lengths", "rung_trials", "budget", "total_length")}
            for b in method.describe()["brackets"]]


# ---------------------------------------------------------------- arithmetic


def test_integer_logs_modes_and_rung_lengths() -> None:
    assert [floor_log(x, 4) for x in (1, 3, 4, 15, 16, 63, 64)] == [0, 0, 1, 1, 2, 2, 3]
    assert floor_log(6, 2.5) == 1 and floor_log(7, 2.5) == 2  # 2.5**2 = 6.25
    assert mode_brackets("standard", 5) == [5, 4, 3]
    assert mode_brackets("standard", 4) == [4, 3, 2]
    assert mode_brackets("standard", 1) == [1]
    assert mode_brackets("aggressive", 4) == [4]
    assert mode_brackets("conservative", 3) == [3, 2, 1]
    assert effective_max_rungs(5, 32, 16, 4) == 3
    assert effective_max_rungs(5, 6400, 512, 4) == 5
    assert effective_max_rungs(5, 3, 1000, 4) == 1
    assert rung_lengths(5, 6400, 4) == [25, 100, 400, 1600, 6400]
    assert rung_lengths(3, 32, 4) == [2, 8, 32]
    assert rung_lengths(3, 100, 2.5) == [16, 40, 100]
    assert rung_lengths(3, 5, 4) == [1, 1, 5]  # never below 1
    with pytest.raises(ValueError, match="searcher.mode.*standard, aggressive, conservative"):
        mode_brackets("bold", 3)


def test_trials_for_budget_is_the_largest_that_fits() -> None:
    # lengths 100/400/1600/6400; n0 = 103 -> 103*100 + 25*300 + 6*1200 + 1*4800 = 29800 <= 30000; 104 -> 30200
    assert trials_for_budget(30000, 6400, 4, 4) == 103
    assert trials_for_budget(6400, 6400, 4, 1) == 1
    assert trials_for_budget(12799, 6400, 4, 1) == 1
    assert trials_for_budget(12800, 6400, 4, 1) == 2


def test_sync_halving_table() -> None:
    m = SyncHalvingSearch.from_config({"name": "sync_halving", "metric": "loss", "num_rungs": 4,
                                       "max_length": {"batches": 6400}, "budget": {"batches": 30000}})
    assert m.unit == "batches"
    assert brackets_of(m) == [{"rungs": 4, "trials": 103, "rung_lengths": [100, 400, 1600, 6400],
                               "rung_trials": [103, 25, 6, 1], "budget": 30000, "total_length": 29800}]


def test_adaptive_table_standard_mode() -> None:
    # effective max_rungs = min(5, log4(6400)+1 = 7, log4(102400 // 6400 = 16)+1 = 3) = 3 -> standard [3, 2]
    m = AdaptiveSearch.from_config({"name": "adaptive", "metric": "loss", "max_length": {"batches": 6400},
                                    "budget": {"batches": 102400}})
    # bracket 1: 53*400 + 13*1200 + 3*4800 = 51200; bracket 2: 19*1600 + 4*4800 = 49600 (20 would be 56000)
    assert brackets_of(m) == [
        {"rungs": 3, "trials": 53, "rung_lengths": [400, 1600, 6400], "rung_trials": [53, 13, 3],
         "budget": 51200, "total_length": 51200},
        {"rungs": 2, "trials": 19, "rung_lengths": [1600, 6400], "rung_trials": [19, 4],
         "budget": 51200, "total_length": 49600},
    ]
    assert m.describe()["trials"] == 72 and m.describe()["total_length"] == 100800


def test_adaptive_bracket_rungs_override_and_budget_remainder_to_the_first() -> None:
    m = AdaptiveSearch.from_config({"name": "adaptive", "metric": "loss", "max_length": {"epochs": 16},
                                    "budget": {"epochs": 101}, "bracket_rungs": [1, 3], "divisor": 2})
    assert m.unit == "epochs"
    # [3, 1]: budgets 51 and 50; lengths 4/8/16 -> n0 = 6: 6*4 + 3*4 + 1*8 = 44 (7: 28 + 12 + 8 = 48; 8: 32+16+16 = 64)
    assert brackets_of(m) == [
        {"rungs": 3, "trials": 7, "rung_lengths": [4, 8, 16], "rung_trials": [7, 3, 1], "budget": 51,
         "total_length": 48},
        {"rungs": 1, "trials": 3, "rung_lengths": [16], "rung_trials": [3], "budget": 50, "total_length": 48},
    ]


def test_adaptive_simple_tables() -> None:
    # min(5, log4(32)+1 = 3, log4(16)+1 = 3) = 3 -> standard [3, 2], 8 trials each
    m = AdaptiveSimpleSearch.from_config({"name": "adaptive_simple", "metric": "acc", "max_length": {"epochs": 32},
                                          "max_trials": 16})
    assert brackets_of(m) == [
        {"rungs": 3, "trials": 8, "rung_lengths": [2, 8, 32], "rung_trials": [8, 2, 1], "budget": 52,
         "total_length": 52},
        {"rungs": 2, "trials": 8, "rung_lengths": [8, 32], "rung_trials": [8, 2], "budget": 112,
         "total_length": 112},
    ]
    # conservative, 3 rungs: 17 trials -> 6, 6, 5 (the remainder to the most aggressive brackets)
    m = AdaptiveSimpleSearch.from_config({"name": "adaptive_simple", "metric": "acc", "max_trials": 17,
                                          "max_length": {"batches": 6400}, "mode": "conservative", "max_rungs": 3})
    assert [(b["rungs"], b["rung_lengths"], b["rung_trials"]) for b in brackets_of(m)] == [
        (3, [400, 1600, 6400], [6, 1, 1]), (2, [1600, 6400], [6, 1]), (1, [6400], [5])]
    m = AdaptiveSimpleSearch.from_config({"name": "adaptive_simple", "metric": "acc", "max_trials": 17,
                                          "max_length": {"batches": 6400}, "mode": "aggressive", "max_rungs": 3})
    assert brackets_of(m) == [{"rungs": 3, "trials": 17, "rung_lengths": [400, 1600, 6400],
                               "rung_trials": [17, 4, 1], "budget": 17 * 400 + 4 * 1200 + 4800,
                               "total_length": 17 * 400 + 4 * 1200 + 4800}]


def test_config_errors_name_the_field() -> None:
    with pytest.raises(InvalidExperimentConfig, match="searcher.divisor"):
        AdaptiveSearch.from_config({"name": "adaptive", "metric": "m", "max_length": {"batches": 10},
                                    "budget": {"batches": 100}, "divisor": 1})
    with pytest.raises(InvalidExperimentConfig, match="searcher.budget.*greater than max_length"):
        SyncHalvingSearch.from_config({"name": "sync_halving", "metric": "m", "num_rungs": 2,
                                       "max_length": {"batches": 10}, "budget": {"batches": 10}})
    with pytest.raises(InvalidExperimentConfig, match="searcher.max_trials"):
        AdaptiveSimpleSearch.from_config({"name": "adaptive_simple", "metric": "m", "max_length": {"batches": 10}})
    with pytest.raises(ValueError, match="searcher.name: expected 'adaptive'"):
        AdaptiveSearch.from_config({"name": "pbt", "metric": "m"})
    with pytest.raises(ValueError, match="split over 3 brackets gives 83 each, less than max_length.*at least 300"):
        AdaptiveSearch.from_config({"name": "adaptive", "metric": "m", "max_length": {"batches": 100},
                                    "budget": {"batches": 250}, "bracket_rungs": [3, 2, 1]})


# ---------------------------------------------------------------- hand-driven events


def start(method: Any, seed: int = 0) -> tuple:
    ctx = SearchContext(seed, HPARAMS)
    ops = method.initial_operations(ctx)
    ids = [op.request_id for op in ops if isinstance(op, Create)]
    return ctx, ops, ids


def small_sync(**kwargs: Any) -> SyncHalvingSearch:
    # divisor 2, 2 rungs of 5 and 10: n0 = 4 (4*5 + 2*5 = 30 <= 30), rung 1 takes 2
    return SyncHalvingSearch(num_rungs=2, max_length=10, budget=30, divisor=2, **kwargs)


def test_rung_promotes_only_when_every_trial_reported_and_only_the_best() -> None:
    m = small_sync()
    ctx, ops, ids = start(m)
    a, b, c, d = ids
    assert ops == [x for rid in ids for x in (Create(rid, ops[ids.index(rid) * 2].hparams), ValidateAfter(rid, 5))]
    assert m.on_validation_completed(ctx, a, 0.4, 5) == []
    assert m.on_validation_completed(ctx, b, 0.1, 5) == []
    assert m.on_validation_completed(ctx, c, 0.9, 5) == []  # no Close mid-rung with train_stragglers
    assert m.progress() == pytest.approx(15 / 30)
    ops = m.on_validation_completed(ctx, d, 0.2, 5)
    assert sorted(ops, key=repr) == sorted([Close(a), Close(c), ValidateAfter(b, 10), Close(b),
                                            ValidateAfter(d, 10), Close(d)], key=repr)
    assert m.on_trial_closed(ctx, a) == [] and m.on_trial_closed(ctx, c) == []
    assert m.on_validation_completed(ctx, d, 0.15, 10) == []
    assert m.on_validation_completed(ctx, b, 0.05, 10) == []
    assert m.progress() == pytest.approx(1.0)
    assert m.on_trial_closed(ctx, b) == []
    assert m.on_trial_closed(ctx, d) == [Shutdown()]


def test_larger_is_better_promotes_the_largest() -> None:
    m = small_sync(smaller_is_better=False)
    ctx, _, ids = start(m)
    ops: List[Any] = []
    for rid, metric in zip(ids, [0.4, 0.1, 0.9, 0.2]):
        ops = m.on_validation_completed(ctx, rid, metric, 5)
    assert {op.request_id for op in ops if isinstance(op, ValidateAfter)} == {ids[0], ids[2]}


def test_without_train_stragglers_a_sure_loser_closes_mid_rung() -> None:
    m = small_sync(train_stragglers=False)
    ctx, _, (a, b, c, d) = start(m)
    assert m.on_validation_completed(ctx, a, 0.4, 5) == []
    assert m.on_validation_completed(ctx, b, 0.1, 5) == []
    assert m.on_validation_completed(ctx, c, 0.9, 5) == [Close(c)]  # two better already: cannot be promoted
    assert m.on_validation_completed(ctx, d, 0.2, 5) == [Close(a), ValidateAfter(b, 10), Close(b),
                                                         ValidateAfter(d, 10), Close(d)]


def test_early_exit_counts_as_worst_and_is_never_promoted() -> None:
    m = small_sync()
    ctx, _, (a, b, c, d) = start(m)
    assert m.on_trial_exited_early(ctx, a, ExitedReason.ERRORED) == []
    assert m.on_trial_closed(ctx, a) == []
    m.on_validation_completed(ctx, b, 0.1, 5)
    m.on_trial_exited_early(ctx, c, ExitedReason.ERRORED)  # before reporting
    m.on_trial_closed(ctx, c)
    ops = m.on_validation_completed(ctx, d, float("nan"), 5)  # not a number: ranks last, but is alive
    assert ops == [ValidateAfter(b, 10), Close(b), ValidateAfter(d, 10), Close(d)]
    json.dumps(m.snapshot(), allow_nan=False)


def test_a_reported_trial_that_exits_while_waiting_is_not_promoted_and_all_exits_shut_down() -> None:
    m = small_sync()
    ctx, _, (a, b, c, d) = start(m)
    m.on_validation_completed(ctx, a, 0.1, 5)
    m.on_trial_exited_early(ctx, a, ExitedReason.USER_CANCELED)
    m.on_trial_closed(ctx, a)
    for rid in (b, c):
        m.on_trial_exited_early(ctx, rid, ExitedReason.ERRORED)
        m.on_trial_closed(ctx, rid)
    ops = m.on_validation_completed(ctx, d, 0.9, 5)
    assert ops == [ValidateAfter(d, 10), Close(d)]
    m.on_trial_exited_early(ctx, d, ExitedReason.ERRORED)
    assert m.on_trial_closed(ctx, d) == [Shutdown()]
    assert m.progress() == 1.0


def test_a_trial_closed_without_reporting_counts_as_exited() -> None:
    m = small_sync()
    ctx, _, (a, b, c, d) = start(m)
    for rid, metric in ((a, 0.1), (b, 0.2), (c, 0.3)):
        m.on_validation_completed(ctx, rid, metric, 5)
    assert m.on_trial_closed(ctx, b) == []  # killed while waiting: not promoted
    ops = m.on_trial_closed(ctx, d)  # closed before reporting: the rung completes
    assert ops == [ValidateAfter(a, 10), Close(a), ValidateAfter(c, 10), Close(c)]


# ---------------------------------------------------------------- simulations


CONFIGS = [
    {"name": "sync_halving", "metric": "loss", "num_rungs": 3, "max_length": {"batches": 160},
     "budget": {"batches": 2000}},
    {"name": "adaptive", "metric": "loss", "max_length": {"batches": 256}, "budget": {"batches": 4096}},
    {"name": "adaptive", "metric": "loss", "max_length": {"batches": 64}, "budget": {"batches": 2000},
     "mode": "conservative", "divisor": 2, "train_stragglers": False},
    {"name": "adaptive_simple", "metric": "loss", "max_length": {"batches": 256}, "max_trials": 40},
    {"name": "adaptive_simple", "metric": "loss", "max_length": {"records": 1000}, "max_trials": 30,
     "mode": "conservative", "divisor": 3},
]
CLASSES = {"sync_halving": SyncHalvingSearch, "adaptive": AdaptiveSearch, "adaptive_simple": AdaptiveSimpleSearch}


def build(config: Dict[str, Any]) -> Any:
    return CLASSES[config["name"]].from_config(config)


def check_promotions(method: Any, result: SimulationResult, smaller_is_better: bool) -> None:
    """Per bracket: every trial follows the rung lengths, and rung i+1 holds exactly the best of rung i."""
    for index, bracket in enumerate(method.brackets):
        trials = [t for rid, t in result.trials.items() if method.owner[rid] == index]
        assert len(trials) == bracket.trials[0]
        assert sum(t.length for t in trials) <= bracket.budget
        for t in trials:
            lengths = [length for length, _ in t.validations]
            assert lengths == bracket.lengths[: len(lengths)]
        for rung in range(len(bracket.lengths) - 1):
            at = {t.request_id: dict(t.validations)[bracket.lengths[rung]] for t in trials
                  if bracket.lengths[rung] in dict(t.validations)}
            ranked = sorted(at, key=lambda rid: at[rid] if smaller_is_better else -at[rid])
            promoted = {t.request_id for t in trials if bracket.lengths[rung + 1] in dict(t.validations)}
            assert promoted == set(ranked[: bracket.trials[rung + 1]])


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c['name']}-{c.get('mode', 'standard')}")
@pytest.mark.parametrize("smaller_is_better", [True, False])
def test_simulated_runs_respect_budget_and_promote_only_the_top(config: Dict[str, Any], smaller_is_better: bool) -> None:
    method = build({**config, "smaller_is_better": smaller_is_better})
    progress: List[float] = []
    result = simulate(method, HPARAMS, lr_objective, seed=3, on_event=lambda kind, args: progress.append(method.progress()))
    assert result.shutdown and not result.failure
    assert result.total_length == method.describe()["total_length"]  # no exits: every planned unit, no more
    assert all(t.closed for t in result.trials.values())
    check_promotions(method, result, smaller_is_better)
    assert progress == sorted(progress) and progress[0] == 0.0 and method.progress() == 1.0
    for index, bracket in enumerate(method.brackets):  # the best hparams of each bracket train to max_length
        trials = [t for rid, t in result.trials.items() if method.owner[rid] == index]
        pick = min if smaller_is_better else max
        assert pick(trials, key=lambda t: t.hparams["lr"]).length == bracket.lengths[-1] == method.max_length


@pytest.mark.parametrize("config", CONFIGS[1:3], ids=["standard", "conservative"])
def test_same_seed_same_run_and_snapshot_at_every_event_continues_identically(config: Dict[str, Any]) -> None:
    def exits(request_id: str, hparams: Dict[str, Any], length: int) -> Optional[ExitedReason]:
        return ExitedReason.ERRORED if hparams["layers"] == 4 and hparams["lr"] > 0.5 else None

    def run(seed: int, snapshots: bool) -> SimulationResult:
        return simulate(build(config), HPARAMS, lr_objective, seed=seed, exit_early=exits, max_concurrent=3,
                        snapshot_every_event=snapshots)

    plain = run(5, False)
    assert any(t.exited for t in plain.trials.values())
    for other in (run(5, False), run(5, True)):
        assert list(other.trials) == list(plain.trials)
        assert [(t.hparams, t.validations, t.exited) for t in other.trials.values()] == \
               [(t.hparams, t.validations, t.exited) for t in plain.trials.values()]
        assert other.total_length == plain.total_length and other.events == plain.events
    assert [t.hparams for t in run(6, False).trials.values()] != [t.hparams for t in plain.trials.values()]


def test_snapshot_is_plain_json_and_restores_onto_a_fresh_instance() -> None:
    config = CONFIGS[1]
    method = build(config)
    ctx, ops, ids = start(method, seed=1)
    for i, rid in enumerate(ids[:10]):
        method.on_validation_completed(ctx, rid, float(i), method.brackets[method.owner[rid]].lengths[0])
    data = json.loads(json.dumps(method.snapshot(), allow_nan=False))
    fresh = build(config)
    fresh.restore(data)
    assert fresh.snapshot() == method.snapshot() and fresh.progress() == method.progress()
    with pytest.raises(ValueError, match="same config"):
        build(CONFIGS[0]).restore(data)


@settings(max_examples=25, deadline=None)
@given(
    max_length=st.integers(1, 300),
    factor=st.integers(2, 40),
    divisor=st.sampled_from([2, 3, 4, 2.5]),
    mode=st.sampled_from(["standard", "aggressive", "conservative"]),
    stragglers=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_adaptive_never_trains_past_its_budget(max_length: int, factor: int, divisor: float, mode: str,
                                               stragglers: bool, seed: int) -> None:
    budget = max_length * factor
    method = AdaptiveSearch(max_length, budget, mode=mode, divisor=divisor, train_stragglers=stragglers)
    result = simulate(method, HPARAMS, lr_objective, seed=seed, max_concurrent=4)
    assert result.shutdown
    assert result.total_length <= budget
    for index, bracket in enumerate(method.brackets):
        assert sum(t.length for rid, t in result.trials.items() if method.owner[rid] == index) <= bracket.budget
