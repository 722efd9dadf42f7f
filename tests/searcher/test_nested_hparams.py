"""Nested hyperparameters (Determined 0.14+): a mapping without `type` is a group, sampled and searched leaf by leaf,
and delivered nested. stop_once ASHA (0.15+)."""
import random
from typing import Any, Dict

import pytest

from determined.config import (
    InvalidExperimentConfig,
    flat_hparams,
    load_experiment_config,
    sample_hparams,
)
from determined.searcher import (
    AsyncHalvingSearch,
    Close,
    Create,
    GridSearch,
    PBTSearch,
    RandomSearch,
    SearchContext,
    ValidateAfter,
    preview,
    simulate,
)
from determined.searcher._explore import explore

NESTED: Dict[str, Any] = {
    "global_batch_size": 32,
    "optim": {
        "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": 2},
        "momentum": 0.9,
        "schedule": {"warmup": {"type": "int", "minval": 0, "maxval": 10, "count": 3}},
    },
    "arch": {"type": "categorical", "vals": ["mlp", "cnn"]},
    "fixed": {"type": "const", "val": {"a": 1, "b": [2]}},
    "empty": {},
}


def _check_shape(values: Dict[str, Any]) -> None:
    assert set(values) == {"global_batch_size", "optim", "arch", "fixed", "empty"}
    assert set(values["optim"]) == {"lr", "momentum", "schedule"}
    assert 1e-4 <= values["optim"]["lr"] <= 1e-1 and values["optim"]["momentum"] == 0.9
    assert values["optim"]["schedule"]["warmup"] in range(0, 11)
    assert values["arch"] in ("mlp", "cnn")
    assert values["fixed"] == {"a": 1, "b": [2]}  # a const mapping stays one value
    assert values["empty"] == {}


def _config(**overrides: Any) -> Dict[str, Any]:
    return {"entrypoint": "m:T", "searcher": {"name": "single", "metric": "m", "max_length": {"batches": 5}},
            **overrides}


def test_groups_are_canonical_member_by_member() -> None:
    minimal = _config
    config = load_experiment_config(minimal(hyperparameters=NESTED))
    hps = config["hyperparameters"]
    assert hps["optim"]["momentum"] == {"type": "const", "val": 0.9}
    assert hps["optim"]["schedule"]["warmup"]["type"] == "int"
    assert hps["fixed"] == {"type": "const", "val": {"a": 1, "b": [2]}} and hps["empty"] == {}
    assert load_experiment_config(config) == config
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"optim": {"lr": {"type": "double", "minval": 1}}}))
    assert info.value.problems == ["hyperparameters.optim.lr.maxval: missing; a number"]


def test_random_sampling_draws_every_nested_leaf_in_its_range() -> None:
    rng = random.Random(3)
    draws = [sample_hparams(NESTED, rng) for _ in range(50)]
    for values in draws:
        _check_shape(values)
    assert len({v["optim"]["lr"] for v in draws}) == 50 and len({v["optim"]["schedule"]["warmup"] for v in draws}) > 5
    assert sample_hparams(NESTED, random.Random(7)) == sample_hparams(NESTED, random.Random(7))


def test_random_search_creates_trials_with_nested_values() -> None:
    result = simulate(RandomSearch(max_length=10, max_trials=6), NESTED, lambda *a: 0.0, seed=1)
    assert len(result.trials) == 6
    for trial in result.trials.values():
        _check_shape(trial.hparams)


def test_grid_covers_every_nested_leaf() -> None:
    search = GridSearch(max_length=5)
    result = simulate(search, NESTED, lambda *a: 0.0)
    points = [t.hparams for t in result.trials.values()]
    assert len(points) == 2 * 3 * 2  # optim.lr x optim.schedule.warmup x arch
    for values in points:
        _check_shape(values)
    assert {(v["optim"]["lr"], v["optim"]["schedule"]["warmup"], v["arch"]) for v in points} == {
        (lr, w, a) for lr in (1e-4, 1e-1) for w in (0, 5, 10) for a in ("mlp", "cnn")}
    described = preview({"searcher": {"name": "grid", "metric": "m", "max_length": {"batches": 5}},
                         "hyperparameters": NESTED})
    assert described["trials"] == 12
    assert described["values"]["optim.schedule.warmup"] == [0, 5, 10] and "optim.lr" in described["values"]


def test_grid_needs_count_on_nested_leaves() -> None:
    minimal = _config
    hps = {"optim": {"lr": {"type": "double", "minval": 0, "maxval": 1}}}
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters=hps, searcher={"name": "grid", "metric": "m",
                                                                      "max_length": {"batches": 5}}))
    assert info.value.problems[0].startswith("hyperparameters.optim.lr.count: missing; the grid searcher needs")


def test_pbt_explores_nested_leaves() -> None:
    config = {"optim": {"lr": {"type": "double", "minval": 0.0, "maxval": 1.0},
                        "n": {"type": "int", "minval": 1, "maxval": 100}}, "k": 3}
    parent = {"optim": {"lr": 0.5, "n": 50}, "k": 3}
    rng = random.Random(0)
    seen = set()
    for _ in range(20):
        child = explore(parent, config, rng, resample_probability=0.0, perturb_factor=0.2)
        assert set(child) == {"optim", "k"} and child["k"] == 3
        assert child["optim"]["lr"] in (pytest.approx(0.6), pytest.approx(0.4))
        assert child["optim"]["n"] in (60, 40)
        seen.add((round(child["optim"]["lr"], 3), child["optim"]["n"]))
    assert len(seen) == 4  # each nested leaf goes up or down on its own
    assert parent == {"optim": {"lr": 0.5, "n": 50}, "k": 3}  # the parent's values are not touched
    search = PBTSearch(population_size=4, num_rounds=3, length_per_round=5, truncate_fraction=0.5,
                       resample_probability=0.3, perturb_factor=0.2)
    result = simulate(search, config, lambda rid, hp, length, parent: hp["optim"]["lr"], seed=2)
    assert all(0.0 <= t.hparams["optim"]["lr"] <= 1.0 for t in result.trials.values())
    assert any(t.parent for t in result.trials.values())


def test_flat_names_for_tables_and_charts() -> None:
    values = sample_hparams(NESTED, random.Random(0))
    flat = flat_hparams(values, NESTED)
    assert list(flat) == ["global_batch_size", "optim.lr", "optim.momentum", "optim.schedule.warmup", "arch", "fixed"]
    assert flat["fixed"] == {"a": 1, "b": [2]}  # the spec says it is one value
    assert flat_hparams({"a": {"b": 1}, "c": 2}) == {"a.b": 1, "c": 2}  # without specs every mapping is walked


def _ops(ops: list) -> list:
    return [(type(op).__name__, getattr(op, "length", None)) for op in ops]


def test_stop_once_decides_each_trial_once_when_it_reports() -> None:
    ctx = SearchContext(0, {"x": {"type": "double", "minval": 0, "maxval": 1}})
    search = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=4, divisor=2, max_concurrent_trials=1,
                                stop_once=True)
    (create, validate) = search.initial_operations(ctx)
    assert isinstance(create, Create) and isinstance(validate, ValidateAfter) and validate.length == 4
    first = create.request_id
    # The first report ranks first of 1 (the top max(1, 1 // 2) = 1): it trains on at once.
    assert _ops(search.on_validation_completed(ctx, first, 0.5, 4)) == [("ValidateAfter", 8)]
    # Top rung: it is closed, and a new trial starts.
    ops = search.on_validation_completed(ctx, first, 0.4, 8)
    assert isinstance(ops[0], Close) and isinstance(ops[1], Create)
    second = ops[1].request_id
    # A worse second report in rung 0 is not in the top max(1, 2 // 2) = 1: closed at once, never promoted later.
    ops = search.on_validation_completed(ctx, second, 0.9, 4)
    assert isinstance(ops[0], Close) and ops[0].request_id == second and isinstance(ops[1], Create)
    third = ops[1].request_id
    assert _ops(search.on_validation_completed(ctx, third, 0.1, 4)) == [("ValidateAfter", 8)]  # best so far
    # Without stop_once, a first report waits in its rung, and is promoted when a worse one comes (no Close).
    plain = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=4, divisor=2, max_concurrent_trials=1)
    (c1, _) = plain.initial_operations(ctx)
    (c2, _) = plain.on_validation_completed(ctx, c1.request_id, 0.5, 4)
    ops = plain.on_validation_completed(ctx, c2.request_id, 0.9, 4)
    assert [(type(op).__name__, op.request_id) for op in ops][0] == ("ValidateAfter", c1.request_id)
    assert not any(isinstance(op, Close) for op in ops)


def test_stop_once_search_from_config_finishes() -> None:
    from determined.searcher import make_search_method

    config = load_experiment_config({"entrypoint": "m:T", "hyperparameters": {"x": {"type": "double", "minval": 0,
                                                                                    "maxval": 1}},
                                     "searcher": {"name": "adaptive_asha", "metric": "m", "max_length": 64,
                                                  "max_trials": 16, "stop_once": True}})
    method = make_search_method(config["searcher"])
    result = simulate(method, config["hyperparameters"], lambda rid, hp, length, parent: hp["x"] / length, seed=4,
                      snapshot_every_event=True)
    assert result.shutdown and not result.failure and len(result.trials) == 16
