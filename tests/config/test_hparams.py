import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from determined.config import (
    Categorical,
    Constant,
    Double,
    Integer,
    InvalidExperimentConfig,
    Log,
    canonical_hparam,
    grid_values,
    load_experiment_config,
    sample_hparams,
)


def test_helpers_in_code_become_dicts(minimal):
    hps = {
        "global_batch_size": Constant(64),
        "n": Integer(1, 8),
        "dropout": Double(0.1, 0.5, count=3),
        "lr": Log(-4, -1, 10),
        "opt": Categorical(["sgd", "adam"]),
    }
    config = load_experiment_config(minimal(hyperparameters=hps))
    assert config["hyperparameters"] == {
        "global_batch_size": {"type": "const", "val": 64},
        "n": {"type": "int", "minval": 1, "maxval": 8, "count": None},
        "dropout": {"type": "double", "minval": 0.1, "maxval": 0.5, "count": 3},
        "lr": {"type": "log", "base": 10.0, "minval": -4.0, "maxval": -1.0, "count": None},
        "opt": {"type": "categorical", "vals": ["sgd", "adam"]},
    }
    assert Log(-4, -1, 2, count=3).to_dict() == {"type": "log", "minval": -4, "maxval": -1, "base": 2, "count": 3}
    assert Integer(1, 2) == Integer(1, 2) and Integer(1, 2) != Integer(1, 3)
    assert repr(Categorical([1])) == "Categorical(vals=[1])"


def test_det_helpers_flow_through_top_level_package():
    import determined.config as config_pkg

    assert config_pkg.Constant is Constant


def test_bare_values_become_consts(minimal):
    config = load_experiment_config(
        minimal(hyperparameters={"global_batch_size": 32, "s": "x", "l": [1, 2], "d": {"a": 1}, "n": None})
    )
    hps = config["hyperparameters"]
    assert hps["s"] == {"type": "const", "val": "x"}
    assert hps["l"] == {"type": "const", "val": [1, 2]}
    assert hps["d"] == {"a": {"type": "const", "val": 1}}  # a mapping without `type` is a group (0.14+)
    assert hps["n"] == {"type": "const", "val": None}


def test_log_base_default_and_double_floats():
    assert canonical_hparam({"type": "log", "minval": -3, "maxval": 0})["base"] == 10.0
    assert canonical_hparam({"type": "double", "minval": 0, "maxval": 1}) == {
        "type": "double", "minval": 0.0, "maxval": 1.0, "count": None
    }


@pytest.mark.parametrize(
    "spec, path",
    [
        ({"type": "int", "minval": 1.5, "maxval": 3}, "hyperparameters.h.minval"),
        ({"type": "int", "minval": 5, "maxval": 3}, "hyperparameters.h"),
        ({"type": "int", "maxval": 3}, "hyperparameters.h.minval"),
        ({"type": "double", "minval": "a", "maxval": 3}, "hyperparameters.h.minval"),
        ({"type": "log", "minval": 1, "maxval": 3, "base": 0}, "hyperparameters.h.base"),
        ({"type": "log", "minval": 1, "maxval": 3, "base": 1}, "hyperparameters.h.base"),
        ({"type": "categorical", "vals": []}, "hyperparameters.h.vals"),
        ({"type": "categorical", "vals": "abc"}, "hyperparameters.h.vals"),
        ({"type": "categorical"}, "hyperparameters.h.vals"),
        ({"type": "const"}, "hyperparameters.h.val"),
        ({"type": "uniform", "minval": 0, "maxval": 1}, "hyperparameters.h.type"),
        ({"type": "int", "minval": 0, "maxval": 1, "count": 0}, "hyperparameters.h.count"),
        ({"type": "int", "minval": 0, "maxval": 1, "step": 1}, "hyperparameters.h.step"),
    ],
)
def test_bad_hparams(minimal, spec, path):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"global_batch_size": 32, "h": spec}))
    assert [p.split(":")[0] for p in info.value.problems] == [path], info.value.problems


def test_unknown_type_suggests(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"global_batch_size": 32, "h": {"type": "doubel"}}))
    assert "did you mean 'double'?" in info.value.problems[0]


def test_global_batch_size_required_only_for_lengths_in_records_or_epochs(minimal):
    assert load_experiment_config(minimal(hyperparameters={"lr": 0.1}))["hyperparameters"] == {
        "lr": {"type": "const", "val": 0.1}}
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"lr": 0.1}, records_per_epoch=100,
                                       min_validation_period={"epochs": 1}))
    (problem,) = info.value.problems
    assert problem.startswith("hyperparameters.global_batch_size: missing; min_validation_period (in records or "
                              "epochs) need it: add it under hyperparameters, e.g.")
    assert "global_batch_size: 32" in problem


@pytest.mark.parametrize(
    "gbs",
    [0, -4, 2.5, "32", {"type": "double", "minval": 1, "maxval": 2}, {"type": "int", "minval": 0, "maxval": 8},
     {"type": "categorical", "vals": [16, "32"]}, {"type": "log", "minval": 1, "maxval": 4, "base": 2}],
)
def test_global_batch_size_must_be_positive_int(minimal, gbs):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"global_batch_size": gbs}))
    assert info.value.problems[0].startswith("hyperparameters.global_batch_size:")


@pytest.mark.parametrize(
    "gbs", [1, 32, {"type": "int", "minval": 8, "maxval": 64}, {"type": "categorical", "vals": [16, 32]}]
)
def test_global_batch_size_good_forms(minimal, gbs):
    load_experiment_config(minimal(hyperparameters={"global_batch_size": gbs}))


def test_global_batch_size_at_least_slots(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(hyperparameters={"global_batch_size": 2}, resources={"slots_per_trial": 4}))
    assert ">= resources.slots_per_trial (4)" in info.value.problems[0]


def test_sample_hparams_kinds_and_determinism():
    hps = {
        "c": {"type": "const", "val": "x"},
        "i": {"type": "int", "minval": 0, "maxval": 1},
        "d": Double(0, 1),
        "l": {"type": "log", "minval": -2, "maxval": 0, "base": 10},
        "k": {"type": "categorical", "vals": ["a", "b", "c"]},
        "bare": 7,
    }
    first = sample_hparams(hps, random.Random(5))
    assert first == sample_hparams(hps, random.Random(5))
    assert list(first) == list(hps)
    assert first["c"] == "x" and first["bare"] == 7
    # order of the mapping does not change what is drawn
    assert sample_hparams(dict(reversed(list(hps.items()))), random.Random(5)) == first
    ints = {sample_hparams({"i": hps["i"]}, random.Random(s))["i"] for s in range(200)}
    assert ints == {0, 1}  # maxval is included
    assert {sample_hparams({"k": hps["k"]}, random.Random(s))["k"] for s in range(200)} == {"a", "b", "c"}


def test_sample_rejects_invalid_specs():
    with pytest.raises(InvalidExperimentConfig):
        sample_hparams({"i": {"type": "int", "minval": 3, "maxval": 1}}, random.Random(0))


numbers = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(-10**6, 10**6), b=st.integers(-10**6, 10**6), x=numbers, y=numbers,
    e1=st.floats(-8, 8), e2=st.floats(-8, 8), base=st.sampled_from([2.0, 10.0, math.e, 0.5]),
    vals=st.lists(st.integers() | st.text(max_size=3), min_size=1, max_size=5), seed=st.integers(0, 2**32),
)
def test_sample_always_within_range(a, b, x, y, e1, e2, base, vals, seed):
    hps = {
        "i": Integer(min(a, b), max(a, b)),
        "d": Double(min(x, y), max(x, y)),
        "l": Log(min(e1, e2), max(e1, e2), base),
        "k": Categorical(vals),
    }
    s = sample_hparams(hps, random.Random(seed))
    assert isinstance(s["i"], int) and min(a, b) <= s["i"] <= max(a, b)
    assert min(x, y) <= s["d"] <= max(x, y)
    ends = sorted([base ** min(e1, e2), base ** max(e1, e2)])
    assert ends[0] * (1 - 1e-9) <= s["l"] <= ends[1] * (1 + 1e-9)
    assert s["k"] in vals


def test_grid_values_rules():
    assert grid_values({"type": "const", "val": 3}) == [3]
    assert grid_values(5) == [5]
    assert grid_values(Categorical(["a", "b"])) == ["a", "b"]
    assert grid_values(Integer(0, 10, count=3)) == [0, 5, 10]
    assert grid_values(Integer(1, 4, count=3)) == [1, 3, 4]  # 1 + round(1.5) = 3, half rounds up
    assert grid_values(Integer(1, 3, count=10)) == [1, 2, 3]  # clamped to maxval-minval+1
    assert grid_values(Integer(1, 4, count=1)) == [2]  # midpoint
    assert grid_values(Double(0, 1, count=5)) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert grid_values(Double(0, 1, count=1)) == [0.5]
    assert grid_values(Log(-3, -1, 10, count=3)) == pytest.approx([0.001, 0.01, 0.1])
    assert grid_values(Log(-3, -1, 10, count=1)) == pytest.approx([0.01])
    with pytest.raises(InvalidExperimentConfig, match="needs `count`"):
        grid_values(Double(0, 1))


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(-1000, 1000), span=st.integers(0, 1000), count=st.integers(1, 3000))
def test_grid_int_counts_distinct_and_in_range(lo, span, count):
    values = grid_values(Integer(lo, lo + span, count=count))
    assert len(values) == min(count, span + 1)
    assert len(set(values)) == len(values)
    assert all(lo <= v <= lo + span for v in values)
    if len(values) > 1:
        assert values[0] == lo and values[-1] == lo + span


@settings(max_examples=100, deadline=None)
@given(x=numbers, y=numbers, count=st.integers(1, 50))
def test_grid_double_counts(x, y, count):
    lo, hi = min(x, y), max(x, y)
    values = grid_values(Double(lo, hi, count=count))
    assert len(values) == count
    assert all(lo <= v <= hi for v in values)


def test_numpy_scalars_become_plain_values(minimal):
    import json

    import numpy as np

    config = load_experiment_config(
        minimal(hyperparameters={"global_batch_size": 16, "lr": Constant(np.float32(0.5)),
                                 "k": Categorical([np.int64(1), np.int64(2)])}, data={"n": np.int32(3)})
    )
    assert config["hyperparameters"]["lr"] == {"type": "const", "val": 0.5}
    assert config["hyperparameters"]["k"]["vals"] == [1, 2] and type(config["hyperparameters"]["k"]["vals"][0]) is int
    json.dumps(config)
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(data={"arr": np.zeros(3)}))
    assert info.value.problems[0].startswith("data.arr: got array(")


hparam_specs = st.one_of(
    st.integers(-5, 5) | st.text(max_size=4) | st.none(),
    st.tuples(st.integers(-100, 100), st.integers(0, 100), st.none() | st.integers(1, 9)).map(
        lambda t: {"type": "int", "minval": t[0], "maxval": t[0] + t[1], "count": t[2]}
    ),
    st.tuples(numbers, numbers).map(lambda t: {"type": "double", "minval": min(t), "maxval": max(t)}),
    st.tuples(st.floats(-5, 5), st.floats(-5, 5), st.sampled_from([2, 10])).map(
        lambda t: {"type": "log", "minval": min(t[:2]), "maxval": max(t[:2]), "base": t[2]}
    ),
    st.lists(st.integers() | st.booleans(), min_size=1, max_size=4).map(lambda v: {"type": "categorical", "vals": v}),
)


@settings(max_examples=100, deadline=None)
@given(hps=st.dictionaries(st.text("abcxyz", min_size=1, max_size=5), hparam_specs, max_size=5))
def test_canonical_hyperparameters_are_stable(hps):
    raw = {
        "entrypoint": "m:T",
        "hyperparameters": {**hps, "global_batch_size": 8},
        "searcher": {"name": "random", "metric": "loss", "max_length": {"batches": 5}, "max_trials": 3},
    }
    config = load_experiment_config(raw)
    assert load_experiment_config(config) == config
    assert all("type" in spec for spec in config["hyperparameters"].values())  # no mapping constants generated
    assert set(sample_hparams(config["hyperparameters"], random.Random(0))) == set(raw["hyperparameters"])
