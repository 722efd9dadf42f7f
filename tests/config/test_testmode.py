import pytest

from determined.config import InvalidExperimentConfig, load_experiment_config, make_test_config


def test_test_mode_config(minimal, tmp_path, monkeypatch):
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path))
    config = load_experiment_config(
        minimal(
            description="mnist",
            hyperparameters={"global_batch_size": {"type": "categorical", "vals": [16, 32]}, "lr": 0.1,
                             "layers": {"type": "int", "minval": 1, "maxval": 4}},
            searcher={"name": "adaptive_asha", "metric": "acc", "smaller_is_better": False, "max_trials": 16,
                      "max_length": {"epochs": 3}},
            records_per_epoch=600,
            resources={"slots_per_trial": 2},
            min_checkpoint_period={"batches": 50},
        )
    )
    test = make_test_config(config, {"global_batch_size": 32, "lr": 0.1, "layers": 3})
    assert test["description"] == "[test-mode] mnist"
    assert test["scheduling_unit"] == 1
    assert test["min_validation_period"] == {"batches": 1}
    assert test["searcher"] == {
        "name": "single", "metric": "acc", "smaller_is_better": False, "source_trial_id": None,
        "source_checkpoint_uuid": None, "max_length": {"batches": 1},
    }
    assert test["hyperparameters"] == {
        "global_batch_size": {"type": "const", "val": 32},
        "lr": {"type": "const", "val": 0.1},
        "layers": {"type": "const", "val": 3},
    }
    storage = test["checkpoint_storage"]
    assert storage["type"] == "shared_fs" and storage["host_path"] == str(tmp_path)
    assert (storage["save_experiment_best"], storage["save_trial_best"], storage["save_trial_latest"]) == (0, 0, 0)
    assert test["max_restarts"] == 0
    assert test["resources"]["slots_per_trial"] == 2
    assert test["min_checkpoint_period"] == {"batches": 50}
    assert config["scheduling_unit"] == 100  # the input is not modified
    assert load_experiment_config(test) == test


def test_test_mode_keeps_given_storage_and_samples_missing_hparams(minimal):
    config = minimal(checkpoint_storage={"type": "s3", "bucket": "b"},
                     hyperparameters={"global_batch_size": 8, "d": {"type": "double", "minval": 0, "maxval": 1}})
    test = make_test_config(config, {})
    assert test["checkpoint_storage"]["bucket"] == "b" and test["checkpoint_storage"]["save_trial_latest"] == 0
    assert test["hyperparameters"]["global_batch_size"] == {"type": "const", "val": 8}
    assert test["hyperparameters"]["d"]["type"] == "const" and 0 <= test["hyperparameters"]["d"]["val"] <= 1


def test_test_mode_rejects_invalid_config():
    with pytest.raises(InvalidExperimentConfig):
        make_test_config({"entrypoint": "x:Y"}, {})
