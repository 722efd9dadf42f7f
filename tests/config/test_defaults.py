import json
import re

import pytest

from determined.config import TOP_LEVEL_FIELDS, InvalidExperimentConfig, load_experiment_config


def test_minimal_config_gets_every_default(minimal_config):
    config = load_experiment_config(minimal_config)
    assert list(config) == list(TOP_LEVEL_FIELDS)
    assert re.fullmatch(r"Experiment \([a-z]+ [a-z]+ [a-z]+\)", config["description"])
    assert config["labels"] == [] and config["data"] == {}
    assert config["checkpoint_storage"] is None and config["tensorboard_storage"] is None
    assert config["perform_initial_validation"] is False
    assert config["min_validation_period"] == {"batches": 0}
    assert config["min_checkpoint_period"] == {"batches": 0}
    assert config["checkpoint_policy"] == "best"
    assert config["hyperparameters"] == {"global_batch_size": {"type": "const", "val": 32}}
    assert config["searcher"] == {
        "name": "single",
        "metric": "validation_loss",
        "smaller_is_better": True,
        "source_trial_id": None,
        "source_checkpoint_uuid": None,
        "max_length": {"batches": 100},
    }
    assert config["resources"]["slots_per_trial"] == 1
    assert config["resources"]["max_slots"] is None
    assert config["resources"]["weight"] == 1.0
    assert config["optimizations"] == {
        "aggregation_frequency": 1,
        "average_aggregated_gradients": True,
        "average_training_metrics": False,
        "gradient_compression": False,
        "mixed_precision": "O0",
        "tensor_fusion_threshold": 64,
        "tensor_fusion_cycle_time": 5,
        "auto_tune_tensor_fusion": False,
        "grad_updates_size_file": None,
    }
    assert config["records_per_epoch"] == 0 and config["scheduling_unit"] == 100
    assert config["bind_mounts"] == []
    assert config["environment"]["image"]["cpu"].startswith("determinedai/environments:")
    assert config["environment"]["environment_variables"] == {"cpu": [], "cuda": [], "rocm": [], "gpu": []}
    assert config["reproducibility"] == {"experiment_seed": None}
    assert config["name"] == config["description"]
    assert config["workspace"] == "" and config["project"] == ""
    assert [p["name"] for p in config["log_policies"]] == ["CUDA OOM", "ECC Error"]
    assert config["profiling"]["enabled"] is False and config["retention_policy"] is None
    assert config["preemption_timeout"] is None and config["slurm"]["sbatch_args"] is None and config["pbs"]["slots_per_node"] is None
    assert config["integrations"] is None
    assert config["max_restarts"] == 5
    assert config["debug"] is False and config["internal"] is None
    assert config["entrypoint"] == "model_def:MyTrial"
    assert config["data_layer"]["type"] == "shared_fs"


def test_canonical_config_is_json_and_idempotent(minimal_config):
    config = load_experiment_config(minimal_config)
    assert json.loads(json.dumps(config)) == config
    assert load_experiment_config(config) == config


def test_descriptions_are_random_unless_given(minimal):
    descriptions = {load_experiment_config(minimal())["description"] for _ in range(20)}
    assert len(descriptions) > 1
    assert load_experiment_config(minimal(description="mine"))["description"] == "mine"


def test_null_means_default(minimal):
    config = load_experiment_config(minimal(max_restarts=None, labels=None, resources={"slots_per_trial": None}))
    assert config["max_restarts"] == 5 and config["labels"] == [] and config["resources"]["slots_per_trial"] == 1


def test_given_values_are_kept(minimal):
    config = load_experiment_config(
        minimal(
            description="d",
            labels=["a", "b"],
            data={"url": "http://x", "n": [1, 2]},
            perform_initial_validation=True,
            checkpoint_policy="all",
            records_per_epoch=1000,
            min_validation_period={"epochs": 2},
            resources={"slots_per_trial": 2, "max_slots": 4, "weight": 2},
            optimizations={"aggregation_frequency": 4, "mixed_precision": "O1"},
            reproducibility={"experiment_seed": 42},
            max_restarts=0,
            debug=True,
        )
    )
    assert config["labels"] == ["a", "b"] and config["data"] == {"url": "http://x", "n": [1, 2]}
    assert config["min_validation_period"] == {"epochs": 2}
    assert config["resources"]["max_slots"] == 4 and config["resources"]["weight"] == 2.0
    assert config["optimizations"]["aggregation_frequency"] == 4
    assert config["optimizations"]["average_aggregated_gradients"] is True
    assert config["reproducibility"]["experiment_seed"] == 42
    assert config["max_restarts"] == 0 and config["debug"] is True and config["checkpoint_policy"] == "all"


@pytest.mark.parametrize(
    "override, path",
    [
        ({"checkpoint_policy": "some"}, "checkpoint_policy"),
        ({"reproducibility": {"experiment_seed": 2**31}}, "reproducibility.experiment_seed"),
        ({"reproducibility": {"experiment_seed": -1}}, "reproducibility.experiment_seed"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"scheduling_unit": 0}, "scheduling_unit"),
        ({"records_per_epoch": -5}, "records_per_epoch"),
        ({"labels": "a"}, "labels"),
        ({"labels": ["a", 3]}, "labels[1]"),
        ({"data": {1: "x"}}, "data.1"),
        ({"perform_initial_validation": "maybe"}, "perform_initial_validation"),
        ({"optimizations": {"mixed_precision": "O4"}}, "optimizations.mixed_precision"),
        ({"optimizations": {"aggregation_frequency": 0}}, "optimizations.aggregation_frequency"),
        ({"resources": {"slots_per_trial": -1}}, "resources.slots_per_trial"),
        ({"resources": {"slots_per_trial": 4, "max_slots": 2}}, "resources.max_slots"),
        ({"resources": {"weight": 0}}, "resources.weight"),
        ({"debug": 1}, "debug"),
    ],
)
def test_bad_top_level_values(minimal, override, path):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(**override))
    assert any(p.startswith(path + ":") for p in info.value.problems), info.value.problems


def test_entrypoint_required_unless_native(minimal):
    config = minimal()
    del config["entrypoint"]
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(config)
    assert info.value.problems == [
        "entrypoint: missing; a Trial class `module:ClassName` (e.g. `model_def:MNistTrial`), a command (e.g. "
        "`python3 train.py`), or a list of arguments (e.g. [python3, train.py, --epochs, '3'])"
    ]
    native = load_experiment_config({**config, "internal": {"native": {"command": ["python", "train.py"]}}})
    assert native["entrypoint"] is None
    assert native["internal"] == {"native": {"command": ["python", "train.py"]}}


@pytest.mark.parametrize("entrypoint, problem", [
    ("model_def:", "entrypoint: 'model_def:' looks like a Trial class but is not `module:ClassName`"),
    (":Trial", "entrypoint: ':Trial' looks like a Trial class"),
    ("a.b:C.D", "entrypoint: 'a.b:C.D' looks like a Trial class"),
    ("  ", "entrypoint: is empty; a Trial class `module:ClassName`"),
    ([], "entrypoint: is an empty list"),
    (["python3", None], "entrypoint[1]: got null"),
    (3, "entrypoint: got 3 (an int); a Trial class"),
])
def test_bad_entrypoints(minimal, entrypoint, problem):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(entrypoint=entrypoint))
    assert [p for p in info.value.problems if p.startswith(problem)], info.value.problems


@pytest.mark.parametrize("entrypoint, canonical", [
    ("model_def:MNistTrial", "model_def:MNistTrial"),
    ("pkg.sub.model:Trial_2", "pkg.sub.model:Trial_2"),
    ("_m:_T", "_m:_T"),
    ("1st:Trial", "1st:Trial"),  # Determined's own rule: [a-zA-Z0-9_.]+:[a-zA-Z0-9_]+
    ("model_def", "model_def"),  # a command (sh -c), as in Determined
    ("python3 train.py --epochs 3\n", "python3 train.py --epochs 3"),
    ("python3 -m determined.launch.torch_distributed -- --trial model_def:T",
     "python3 -m determined.launch.torch_distributed -- --trial model_def:T"),
    (["python3", "train.py", "--epochs", 3], ["python3", "train.py", "--epochs", "3"]),
])
def test_good_entrypoints(minimal, entrypoint, canonical):
    assert load_experiment_config(minimal(entrypoint=entrypoint))["entrypoint"] == canonical


def test_config_must_be_a_mapping():
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(["a"])  # type: ignore[arg-type]
    assert info.value.problems == ["config: got ['a'] (a list); a mapping of experiment config fields"]


def test_environment_forms(minimal):
    config = load_experiment_config(
        minimal(environment={"image": "my/image:1", "environment_variables": ["A=1", "B=x=y"]})
    )
    assert config["environment"]["image"] == {"cpu": "my/image:1", "cuda": "my/image:1", "rocm": "my/image:1",
                                               "gpu": "my/image:1"}
    assert config["environment"]["environment_variables"]["gpu"] == ["A=1", "B=x=y"]
    assert config["environment"]["environment_variables"]["cpu"] == ["A=1", "B=x=y"]
    config = load_experiment_config(
        minimal(environment={"image": {"gpu": "g"}, "environment_variables": {"cpu": ["C=2"]}, "ports": {"tb": 6006}})
    )
    assert config["environment"]["image"]["gpu"] == config["environment"]["image"]["cuda"] == "g"
    assert config["environment"]["image"]["cpu"].startswith("determinedai/environments:")
    assert config["environment"]["environment_variables"] == {"cpu": ["C=2"], "cuda": [], "rocm": [], "gpu": []}
    assert config["environment"]["ports"] == {"tb": 6006}
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(environment={"image": {"tpu": "x"}, "environment_variables": ["NOEQUALS"]}))
    assert [p.split(":")[0] for p in info.value.problems] == [
        "environment.image.tpu",
        "environment.environment_variables[0]",
    ]


def test_bind_mounts(minimal):
    config = load_experiment_config(minimal(bind_mounts=[{"host_path": "/data", "container_path": "/mnt/data"}]))
    assert config["bind_mounts"] == [
        {"host_path": "/data", "container_path": "/mnt/data", "read_only": False, "propagation": "rprivate"}
    ]
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(minimal(bind_mounts=[{"host_path": "data", "container_path": "."}]))
    assert [p.split(":")[0] for p in info.value.problems] == [
        "bind_mounts[0].host_path",
        "bind_mounts[0].container_path",
    ]


def test_input_is_not_modified(minimal):
    import copy

    raw = minimal(searcher={"name": "single", "metric": "m", "max_steps": 3}, batches_per_step=5,
                  hyperparameters={"global_batch_size": 32, "x": {"type": "int", "minval": 1, "maxval": 2}})
    before = copy.deepcopy(raw)
    config = load_experiment_config(raw)
    assert raw == before
    config["hyperparameters"]["x"]["minval"] = 99
    config["resources"]["slots_per_trial"] = 8
    assert raw == before and load_experiment_config(minimal())["resources"]["slots_per_trial"] == 1
