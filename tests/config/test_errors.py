import pickle

import pytest

from determined.config import InvalidExperimentConfig, load_experiment_config
from determined.config.errors import describe


def test_every_problem_is_listed_at_once():
    raw = {
        "serancher": {"name": "single"},
        "hyperparameters": {"lr": {"type": "double", "minval": "low", "maxval": 1}},
        "resources": {"slots_per_trial": "two", "max_slot": 3},
        "min_validation_period": {"epochs": 1},
        "checkpoint_policy": "sometimes",
        "entrypoint": "model_def:",
    }
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(raw)
    problems = info.value.problems
    paths = [p.split(":")[0] for p in problems]
    assert paths == [
        "serancher",
        "checkpoint_policy",
        "hyperparameters.lr.minval",
        "searcher",
        "resources.max_slot",
        "resources.slots_per_trial",
        "entrypoint",
        "records_per_epoch",
        "hyperparameters.global_batch_size",
    ]
    assert problems[0].startswith("serancher: unknown field (did you mean 'searcher'?); allowed fields: description,")
    assert "resources.max_slot: unknown field (did you mean 'max_slots'?)" in problems[4]
    assert problems[5] == "resources.slots_per_trial: got 'two' (a string); an int >= 0"
    assert problems[1] == "checkpoint_policy: got 'sometimes' (a string); one of best, all, none"
    text = str(info.value)
    assert text.splitlines()[0] == "invalid experiment config (9 problems):"
    assert all(f"  - {p}" in text.splitlines() for p in problems)
    assert isinstance(info.value, ValueError)


def test_problem_format_is_path_wrong_allowed(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(max_restarts="abc"))
    assert info.value.problems == ["max_restarts: got 'abc' (a string); an int >= 0"]


def test_bools_are_not_ints(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(scheduling_unit=True))
    assert info.value.problems == ["scheduling_unit: got true (a bool); a positive int"]


def test_describe():
    assert describe("abc") == "'abc' (a string)"
    assert describe(3) == "3 (an int)"
    assert describe(2.5) == "2.5 (a float)"
    assert describe(None) == "null"
    assert describe({"a": 1}) == "{'a': 1} (a mapping)"
    assert describe("x" * 100).endswith("... (a string)")


def test_error_pickles():
    err = InvalidExperimentConfig(["a: b; c"])
    again = pickle.loads(pickle.dumps(err))
    assert again.problems == ["a: b; c"] and str(again) == str(err)


def test_exported_where_documented():
    import determined.config

    assert determined.config.InvalidExperimentConfig is InvalidExperimentConfig
