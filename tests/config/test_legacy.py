import pytest

from determined.config import InvalidExperimentConfig, load_experiment_config

FULL_0_12 = {
    "description": "mnist_pytorch_adaptive",
    "data": {"url": "https://example.org/mnist.tar.gz"},
    "hyperparameters": {
        "global_batch_size": 64,
        "learning_rate": {"type": "double", "minval": 0.0001, "maxval": 1.0},
        "n_filters1": {"type": "int", "minval": 8, "maxval": 64},
        "dropout1": {"type": "double", "minval": 0.2, "maxval": 0.8},
    },
    "searcher": {
        "name": "adaptive",
        "metric": "validation_error",
        "smaller_is_better": True,
        "target_trial_steps": 64,
        "step_budget": 640,
        "mode": "aggressive",
        "max_rungs": 4,
    },
    "batches_per_step": 50,
    "min_validation_period": 5,
    "min_checkpoint_period": 10,
    "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp", "storage_path": "determined-checkpoint",
                           "save_trial_best": 2},
    "resources": {"slots_per_trial": 1},
    "max_restarts": 3,
    "entrypoint": "model_def:MNistTrial",
}


def test_full_0_12_config_is_upgraded():
    config = load_experiment_config(FULL_0_12)
    assert config["scheduling_unit"] == 50
    assert config["min_validation_period"] == {"batches": 250}
    assert config["min_checkpoint_period"] == {"batches": 500}
    s = config["searcher"]
    assert s["max_length"] == {"batches": 3200}
    assert s["budget"] == {"batches": 32000}
    assert s["mode"] == "aggressive" and s["max_rungs"] == 4 and s["divisor"] == 4 and s["train_stragglers"] is True
    assert "target_trial_steps" not in s and "step_budget" not in s
    assert config["checkpoint_storage"] == {
        "type": "shared_fs",
        "host_path": "/tmp",
        "storage_path": "determined-checkpoint",
        "propagation": "rprivate",
        "save_experiment_best": 0,
        "save_trial_best": 2,
        "save_trial_latest": 1,
    }
    assert config["max_restarts"] == 3 and config["description"] == "mnist_pytorch_adaptive"
    assert "batches_per_step" not in config


def test_batches_per_step_defaults_to_100(minimal):
    config = load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_steps": 9},
                                            min_validation_period=1))
    assert config["searcher"]["max_length"] == {"batches": 900}
    assert config["min_validation_period"] == {"batches": 100}
    assert config["scheduling_unit"] == 100


def test_pbt_steps_per_round_and_other_methods(minimal):
    pbt = {
        "name": "pbt", "metric": "m", "population_size": 4, "num_rounds": 2, "steps_per_round": 3,
        "replace_function": {"truncate_fraction": 0.5},
        "explore_function": {"resample_probability": 0.1, "perturb_factor": 0.1},
    }
    config = load_experiment_config(minimal(searcher=pbt, batches_per_step=10))
    assert config["searcher"]["length_per_round"] == {"batches": 30}
    asha = {"name": "adaptive_asha", "metric": "m", "target_trial_steps": 16, "max_trials": 8}
    assert load_experiment_config(minimal(searcher=asha))["searcher"]["max_length"] == {"batches": 1600}
    rnd = {"name": "random", "metric": "m", "max_steps": 2, "max_trials": 3}
    assert load_experiment_config(minimal(searcher=rnd))["searcher"]["max_length"] == {"batches": 200}


@pytest.mark.parametrize(
    "override, expected",
    [
        ({"batches_per_step": 10, "scheduling_unit": 10},
         "batches_per_step: both batches_per_step (0.12 name) and scheduling_unit (0.13 name) are given for the same "
         "field; keep only scheduling_unit"),
        ({"searcher": {"name": "single", "metric": "m", "max_steps": 1, "max_length": {"batches": 1}}},
         "searcher.max_steps: both max_steps (0.12 name) and max_length (0.13 name) are given for the same field; "
         "keep only max_length"),
        ({"searcher": {"name": "adaptive", "metric": "m", "max_length": {"batches": 1}, "budget": {"batches": 9},
                       "step_budget": 5}},
         "searcher.step_budget: both step_budget (0.12 name) and budget (0.13 name) are given for the same field; "
         "keep only budget"),
        ({"searcher": {"name": "adaptive_asha", "metric": "m", "max_steps": 1, "target_trial_steps": 1,
                       "max_trials": 2}},
         "searcher.target_trial_steps: both max_steps and target_trial_steps are given; keep only one (0.13: "
         "max_length)"),
    ],
)
def test_mixing_old_and_new_names_is_an_error(minimal, override, expected):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(**override))
    assert info.value.problems == [expected]


def test_bad_legacy_values_are_reported_once_under_the_old_name(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_steps": "ten"},
                                       min_validation_period=-1, batches_per_step=0))
    assert info.value.problems == [
        "batches_per_step: got 0 (an int); a positive int (it is renamed scheduling_unit in 0.13)",
    ]
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_steps": "ten"},
                                       min_validation_period=-1))
    assert info.value.problems == [
        "min_validation_period: got -1 (an int); a number of steps (an int >= 0), or use the 0.13 form {batches: N}",
        "searcher.max_steps: got 'ten' (a string); a number of steps (a positive int), or use the 0.13 form "
        "{batches: N}",
    ]


def test_old_name_on_a_method_without_that_field_is_unknown(minimal):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_length": {"batches": 1},
                                                 "step_budget": 5}))
    assert info.value.problems[0].startswith("searcher.step_budget: unknown field for the single searcher")
