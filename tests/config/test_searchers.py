import pytest

from determined.config import InvalidExperimentConfig, load_experiment_config

ML = {"batches": 1000}


def problems_of(config):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(config)
    return info.value.problems


def test_random_defaults_and_required_max_trials(with_searcher):
    s = load_experiment_config(with_searcher(name="random", max_length=ML, max_trials=8))["searcher"]
    assert s["max_trials"] == 8 and s["max_concurrent_trials"] == 0 and s["smaller_is_better"] is True
    assert problems_of(with_searcher(name="random", max_length=ML)) == [
        "searcher.max_trials: missing; the number of trials to create, a positive int"
    ]
    assert problems_of(with_searcher(name="random", max_length=ML, max_trials=0))[0].startswith(
        "searcher.max_trials: got 0 (an int)"
    )


def test_adaptive_asha_defaults(with_searcher):
    s = load_experiment_config(
        with_searcher(name="adaptive_asha", max_length={"epochs": 32}, max_trials=16, smaller_is_better=False)
        | {"records_per_epoch": 100}
    )["searcher"]
    assert s == {
        "name": "adaptive_asha",
        "metric": "validation_loss",
        "smaller_is_better": False,
        "source_trial_id": None,
        "source_checkpoint_uuid": None,
        "max_length": {"epochs": 32},
        "max_trials": 16,
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 5,
        "max_concurrent_trials": 0,
        "bracket_rungs": None,
        "stop_once": False,
        "time_metric": None,
        "max_time": None,
    }


@pytest.mark.parametrize(
    "searcher, path",
    [
        ({"name": "adaptive_asha", "max_length": ML, "max_trials": 4, "divisor": 1}, "searcher.divisor"),
        ({"name": "adaptive_asha", "max_length": ML, "max_trials": 4, "max_rungs": 0}, "searcher.max_rungs"),
        ({"name": "adaptive_asha", "max_length": ML, "max_trials": 4, "mode": "fast"}, "searcher.mode"),
        ({"name": "adaptive_asha", "max_length": ML, "max_trials": 4, "max_concurrent_trials": -1},
         "searcher.max_concurrent_trials"),
        ({"name": "adaptive_asha", "max_length": ML, "max_trials": 4, "bracket_rungs": [0]},
         "searcher.bracket_rungs[0]"),
        ({"name": "adaptive_simple", "max_length": ML, "max_trials": 2001}, "searcher.max_trials"),
        ({"name": "single", "max_length": {"batches": 0}}, "searcher.max_length.batches"),
        ({"name": "single"}, "searcher.max_length"),  # a Trial class entrypoint needs it; a script does not
        ({"name": "adaptive_asha", "max_trials": 4}, "searcher"),  # neither time_metric+max_time nor max_length
        ({"name": "adaptive_asha", "max_trials": 4, "time_metric": "batches"}, "searcher.max_time"),
        ({"name": "async_halving", "num_rungs": 2, "max_trials": 4, "max_time": 9}, "searcher.time_metric"),
        ({"name": "single", "max_length": ML, "smaller_is_better": "maybe"}, "searcher.smaller_is_better"),
        ({"name": "single", "max_length": ML, "source_trial_id": "x"}, "searcher.source_trial_id"),
        ({"name": "single", "max_length": ML, "max_trials": 3}, "searcher.max_trials"),
        ({"name": "sync_halving", "max_length": ML, "budget": ML, "num_rungs": 3}, "searcher.budget"),
        ({"name": "async_halving", "max_length": ML, "max_trials": 3}, "searcher.num_rungs"),
    ],
)
def test_searcher_field_rules(with_searcher, searcher, path):
    problems = problems_of(with_searcher(**searcher))
    assert any(p.startswith(path + ":") for p in problems), problems


def test_metric_is_required_and_a_string(minimal, with_searcher):
    config = minimal(searcher={"name": "single", "max_length": ML})
    assert problems_of(config) == ["searcher.metric: missing; the name of a validation metric (a string)"]
    assert problems_of(with_searcher(name="single", max_length=ML, metric=3)) == [
        "searcher.metric: got 3 (an int); the name of a validation metric (a string)"
    ]


def test_unknown_searcher_name_suggests(with_searcher):
    problems = problems_of(with_searcher(name="adaptive_ahsa", max_length=ML))
    assert problems[0].startswith("searcher.name: got 'adaptive_ahsa' (a string); did you mean 'adaptive_asha'?")
    assert "single, random, grid, adaptive_asha" in problems[0]


def test_missing_searcher(minimal):
    config = minimal()
    del config["searcher"]
    assert problems_of(config) == [
        "searcher: missing; add a searcher, e.g. `searcher: {name: single, metric: validation_loss, "
        "max_length: {batches: 1000}}`"
    ]


def test_unknown_searcher_field_names_the_method(with_searcher):
    problems = problems_of(with_searcher(name="single", max_length=ML, max_lenght=ML))
    assert problems[0].startswith(
        "searcher.max_lenght: unknown field for the single searcher (did you mean 'max_length'?); allowed fields: name, "
    )


def test_adaptive_budget_must_exceed_max_length(with_searcher):
    ok = load_experiment_config(with_searcher(name="adaptive", max_length=ML, budget={"batches": 10000}))["searcher"]
    assert ok["train_stragglers"] is True and ok["mode"] == "standard" and ok["divisor"] == 4
    assert problems_of(with_searcher(name="adaptive", max_length=ML, budget={"batches": 1000})) == [
        "searcher.budget: 1000 batches is not more than max_length (1000 batches); budget must be greater than max_length"
    ]
    assert problems_of(with_searcher(name="adaptive", max_length=ML, budget={"records": 99999})) == [
        "searcher.budget: is in records but max_length is in batches; give budget and max_length in the same unit"
    ]


PBT = {
    "name": "pbt",
    "population_size": 10,
    "num_rounds": 5,
    "length_per_round": {"batches": 200},
    "replace_function": {"truncate_fraction": 0.2},
    "explore_function": {"resample_probability": 0.2, "perturb_factor": 0.2},
}


def test_pbt_valid(with_searcher):
    s = load_experiment_config(with_searcher(**PBT))["searcher"]
    assert s["population_size"] == 10 and s["replace_function"] == {"truncate_fraction": 0.2}
    assert "max_length" not in s


@pytest.mark.parametrize(
    "change, path",
    [
        ({"replace_function": {"truncate_fraction": 0.7}}, "searcher.replace_function.truncate_fraction"),
        ({"replace_function": {"truncate_fraction": -0.1}}, "searcher.replace_function.truncate_fraction"),
        ({"explore_function": {"resample_probability": 1.5, "perturb_factor": 0.1}},
         "searcher.explore_function.resample_probability"),
        ({"explore_function": {"resample_probability": 0.5, "perturb_factor": 2}},
         "searcher.explore_function.perturb_factor"),
        ({"explore_function": {"resample_probability": 0.5}}, "searcher.explore_function.perturb_factor"),
        ({"population_size": 0}, "searcher.population_size"),
        ({"num_rounds": 0}, "searcher.num_rounds"),
        ({"length_per_round": {"batches": 0}}, "searcher.length_per_round.batches"),
        ({"replace_function": None}, "searcher.replace_function"),
    ],
)
def test_pbt_rules(with_searcher, change, path):
    problems = problems_of(with_searcher(**{**PBT, **change}))
    assert any(p.startswith(path + ":") for p in problems), problems


def test_truncate_fraction_message(with_searcher):
    problems = problems_of(with_searcher(**{**PBT, "replace_function": {"truncate_fraction": 0.7}}))
    assert problems == ["searcher.replace_function.truncate_fraction: got 0.7 (a float); a number from 0 to 0.5"]


GRID_HPS = {
    "global_batch_size": 32,
    "lr": {"type": "log", "minval": -4, "maxval": -1, "count": 4},
    "layers": {"type": "int", "minval": 1, "maxval": 3, "count": 5},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def test_grid_valid(minimal):
    config = load_experiment_config(minimal(hyperparameters=GRID_HPS, searcher={"name": "grid", "metric": "m",
                                                                                 "max_length": ML}))
    assert config["searcher"]["name"] == "grid"


def test_grid_requires_count_and_names_the_hparams(minimal):
    hps = dict(GRID_HPS, dropout={"type": "double", "minval": 0, "maxval": 0.5}, lr={"type": "log", "minval": -4,
                                                                                   "maxval": -1})
    problems = problems_of(minimal(hyperparameters=hps, searcher={"name": "grid", "metric": "m", "max_length": ML}))
    assert [p.split(":")[0] for p in problems] == ["hyperparameters.lr.count", "hyperparameters.dropout.count"]
    assert "add e.g. `count: 5` to dropout" in problems[1]
    # other searchers do not need count
    load_experiment_config(minimal(hyperparameters=hps, searcher={"name": "random", "metric": "m", "max_length": ML,
                                                                  "max_trials": 2}))


def test_grid_cap_of_2000(minimal):
    hps = {"global_batch_size": 32, "a": {"type": "double", "minval": 0, "maxval": 1, "count": 50},
           "b": {"type": "double", "minval": 0, "maxval": 1, "count": 40}}
    grid = {"name": "grid", "metric": "m", "max_length": ML}
    load_experiment_config(minimal(hyperparameters=hps, searcher=grid))  # exactly 2000
    hps["c"] = {"type": "categorical", "vals": [1, 2]}
    problems = problems_of(minimal(hyperparameters=hps, searcher=grid))
    assert problems == [
        "searcher: the grid has 4000 points (a: 50 x b: 40 x c: 2), more than the maximum of 2000 trials; "
        "lower the count or the number of vals of some hyperparameters"
    ]
    # an int's count is clamped to the number of ints in its range
    small = {"global_batch_size": 32, "a": {"type": "int", "minval": 1, "maxval": 3, "count": 100000}}
    load_experiment_config(minimal(hyperparameters=small, searcher=grid))


def test_epochs_need_records_per_epoch(with_searcher):
    config = with_searcher(name="single", max_length={"epochs": 3})
    assert problems_of(config) == [
        "records_per_epoch: searcher.max_length is in epochs but records_per_epoch is not set; set records_per_epoch "
        "to the number of records in one epoch of the training data (a positive int)"
    ]
    config["min_checkpoint_period"] = {"epochs": 1}
    assert "min_checkpoint_period, searcher.max_length are in epochs" in problems_of(config)[0]
    config["records_per_epoch"] = 5000
    assert load_experiment_config(config)["searcher"]["max_length"] == {"epochs": 3}


def test_pbt_length_per_round_in_epochs_needs_records_per_epoch(with_searcher):
    problems = problems_of(with_searcher(**{**PBT, "length_per_round": {"epochs": 1}}))
    assert problems[0].startswith("records_per_epoch: searcher.length_per_round is in epochs")


def test_sync_and_async_halving(with_searcher):
    s = load_experiment_config(
        with_searcher(name="sync_halving", num_rungs=3, max_length=ML, budget={"batches": 5000})
    )["searcher"]
    assert s["divisor"] == 4 and s["train_stragglers"] is True
    a = load_experiment_config(with_searcher(name="async_halving", num_rungs=3, max_length=ML, max_trials=9))
    assert a["searcher"]["max_concurrent_trials"] == 0
