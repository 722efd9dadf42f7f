"""Secrets of an experiment config, hidden in what the master answers (determined.config.redaction)."""
from determined.config import redaction
from determined.config.redaction import HIDDEN


def test_storage_keys_data_secrets_registry_password_and_secret_variables_are_hidden() -> None:
    config = {
        "checkpoint_storage": {"type": "s3", "bucket": "b", "access_key": "AK", "secret_key": "SK", "prefix": "p",
                               "endpoint_url": "http://x", "save_trial_best": 1},
        "tensorboard_storage": {"type": "s3", "bucket": "t", "secret_key": "SK2"},
        "data": {"secrets": {"api": "TOKEN", "other": 3}, "url": "https://data"},
        "environment": {"registry_auth": {"username": "u", "password": "PW"},
                        "environment_variables": {"cpu": ["WANDB_API_KEY=K1", "HF_TOKEN=K2", "DB_PASSWORD=K3",
                                                          "PLAIN=visible", "NOEQUALS"], "gpu": []}},
        "hyperparameters": {"secret_key": {"type": "const", "val": 1}},
    }
    out = redaction.experiment_config(config)
    assert out["checkpoint_storage"] == {**config["checkpoint_storage"], "access_key": HIDDEN, "secret_key": HIDDEN}
    assert out["tensorboard_storage"]["secret_key"] == HIDDEN
    assert out["data"] == {"secrets": {"api": HIDDEN, "other": HIDDEN}, "url": "https://data"}
    assert out["environment"]["registry_auth"] == {"username": "u", "password": HIDDEN}
    assert out["environment"]["environment_variables"]["cpu"] == [
        f"WANDB_API_KEY={HIDDEN}", f"HF_TOKEN={HIDDEN}", f"DB_PASSWORD={HIDDEN}", "PLAIN=visible", "NOEQUALS"]
    assert out["hyperparameters"] == config["hyperparameters"], "only the sections that hold secrets"
    assert config["checkpoint_storage"]["secret_key"] == "SK", "the stored config is not changed"
    assert redaction.hidden_values(out["checkpoint_storage"]) and not redaction.hidden_values(config["data"])
    shared = {"type": "shared_fs", "host_path": "/h", "storage_path": "s"}
    assert redaction.storage(shared) == shared and redaction.storage(None) is None
