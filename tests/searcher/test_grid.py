import itertools
from typing import Any, Dict

import pytest

from determined import config as det_config
from determined import searcher
from determined.searcher import Close, Create, GridSearch, SearchContext, Searcher, Shutdown, ValidateAfter, simulate
from determined.searcher._grid import grid_axes, grid_points

HPARAMS: Dict[str, Any] = {
    "global_batch_size": 16,
    "layers": {"type": "int", "minval": 1, "maxval": 7, "count": 4},
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -2, "count": 3},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5, "count": 2},
}


def test_values_per_type() -> None:
    axes = grid_axes(det_config.load_experiment_config(
        {"entrypoint": "m:T", "hyperparameters": HPARAMS,
         "searcher": {"name": "grid", "metric": "loss", "max_length": {"batches": 10}}})["hyperparameters"])
    assert list(axes) == ["act", "dropout", "global_batch_size", "layers", "lr"]  # sorted names
    assert axes["global_batch_size"] == [16]
    assert axes["act"] == ["relu", "tanh"]
    assert axes["layers"] == [1, 3, 5, 7]
    assert axes["dropout"] == [0.0, 0.5]
    assert axes["lr"] == pytest.approx([1e-4, 1e-3, 1e-2])


def test_count_rules() -> None:
    clamped = grid_axes({"k": {"type": "int", "minval": 2, "maxval": 4, "count": 10}})
    assert clamped["k"] == [2, 3, 4]  # count clamped to maxval - minval + 1
    assert grid_axes({"k": {"type": "int", "minval": 2, "maxval": 7, "count": 1}})["k"] == [4]  # the midpoint
    assert grid_axes({"d": {"type": "double", "minval": 1.0, "maxval": 2.0, "count": 1}})["d"] == [1.5]
    assert grid_axes({"d": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 5}})["d"] == [0, 0.25, 0.5, 0.75, 1]
    assert grid_axes({"l": {"type": "log", "base": 2, "minval": 0, "maxval": 3, "count": 4}})["l"] == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="hyperparameters.k: .*count"):
        grid_axes({"k": {"type": "int", "minval": 2, "maxval": 7}})


def test_cap_of_2000_points_is_checked_here_too() -> None:
    big = {"a": {"type": "int", "minval": 0, "maxval": 100, "count": 50},
           "b": {"type": "int", "minval": 0, "maxval": 100, "count": 41}}
    with pytest.raises(ValueError, match="2050 points .*a: 50 x b: 41.*maximum of 2000"):
        grid_points(big)
    method = GridSearch(max_length=10)
    with pytest.raises(ValueError, match="maximum of 2000"):
        method.initial_operations(SearchContext(0, big))


def test_operations_in_sorted_name_order_first_name_slowest() -> None:
    hp = {"b": {"type": "categorical", "vals": [1, 2]}, "a": {"type": "categorical", "vals": ["x", "y", "z"]}}
    ops = GridSearch(max_length=5, unit="epochs").initial_operations(SearchContext(0, hp))
    assert [type(op) for op in ops] == [Create, ValidateAfter, Close] * 6
    points = [op.hparams for op in ops if isinstance(op, Create)]
    assert [(p["a"], p["b"]) for p in points] == list(itertools.product(["x", "y", "z"], [1, 2]))
    assert all(list(p) == ["b", "a"] for p in points)  # keys in the config's order
    assert {op.length for op in ops if isinstance(op, ValidateAfter)} == {5}


def test_product_covered_exactly_once_and_shutdown() -> None:
    cfg = det_config.load_experiment_config({"entrypoint": "m:T", "hyperparameters": HPARAMS,
                                             "searcher": {"name": "grid", "metric": "loss", "max_length": {"records": 64}}})
    method = searcher.make_search_method(cfg["searcher"])
    assert isinstance(method, GridSearch) and method.unit == "records"
    result = simulate(method, cfg["hyperparameters"], lambda rid, hp, length, parent: hp["dropout"], max_concurrent=3)
    assert result.shutdown and len(result.trials) == 2 * 2 * 1 * 4 * 3
    seen = [tuple(sorted((k, str(v)) for k, v in t.hparams.items())) for t in result.trials.values()]
    assert len(set(seen)) == len(seen)
    axes = grid_axes(cfg["hyperparameters"])
    expected = {tuple(sorted((k, str(v)) for k, v in zip(axes, combo))) for combo in itertools.product(*axes.values())}
    assert set(seen) == expected
    assert all(t.length == 64 and len(t.validations) == 1 for t in result.trials.values())
    assert result.total_length == 48 * 64
    assert method.progress() == 1.0


def test_progress_snapshot_and_shutdown_by_hand() -> None:
    cfg = {"searcher": {"name": "grid", "metric": "m", "max_length": {"batches": 10}},
           "hyperparameters": {"a": {"type": "categorical", "vals": [1, 2]}}}
    s = Searcher.from_config(cfg, seed=1)
    ids = [op.request_id for op in s.initial_operations() if isinstance(op, Create)]
    assert s.validation_completed(ids[0], 1.0, 10) == []
    assert s.progress() == pytest.approx(0.5)
    restored = Searcher.from_config(cfg, seed=2)
    restored.restore(s.snapshot())
    assert restored.trial_closed(ids[0]) == [] and restored.progress() == pytest.approx(0.5)
    assert restored.trial_closed(ids[1]) == [Shutdown()]
