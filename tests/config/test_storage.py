import pytest

from determined.config import InvalidExperimentConfig, default_checkpoint_storage, load_experiment_config


BASE = {
    "entrypoint": "model_def:MyTrial",
    "hyperparameters": {"global_batch_size": 32},
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 100}},
}


def storage(cfg):
    return load_experiment_config({**BASE, "checkpoint_storage": cfg})["checkpoint_storage"]


def problems(**overrides):
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config({**BASE, **overrides})
    return info.value.problems


def test_each_type_with_gc_defaults():
    assert storage({"type": "s3", "bucket": "b"}) == {
        "type": "s3", "bucket": "b", "access_key": None, "secret_key": None, "endpoint_url": None, "prefix": None,
        "save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1,
    }
    assert storage({"type": "gcs", "bucket": "b", "prefix": "p"})["prefix"] == "p"
    hdfs = storage({"type": "hdfs", "hdfs_url": "hdfs://a:8020;hdfs://b:8020", "hdfs_path": "/ckpt"})
    assert hdfs["user"] is None and hdfs["save_trial_latest"] == 1
    shared = storage({"type": "shared_fs", "host_path": "/data", "storage_path": "/data/ckpt", "save_trial_latest": 0,
                      "container_path": "/determined_shared_fs"})
    assert shared["storage_path"] == "/data/ckpt" and shared["save_trial_latest"] == 0
    assert "container_path" not in shared


def test_default_checkpoint_storage_is_canonical():
    default = default_checkpoint_storage("/var/det")
    assert storage(default) == default


@pytest.mark.parametrize(
    "cfg, expected",
    [
        ({"host_path": "/x"}, ["checkpoint_storage.type: missing; one of shared_fs, directory, s3, gcs, azure, hdfs"]),
        ({"type": "ftp"},
         ["checkpoint_storage.type: got 'ftp' (a string); one of shared_fs, directory, s3, gcs, azure, hdfs"]),
        ({"type": "shared_fs"},
         ["checkpoint_storage.host_path: missing; the absolute path of the shared directory on the host"]),
        ({"type": "shared_fs", "host_path": "rel"},
         ["checkpoint_storage.host_path: got 'rel' (a string); an absolute path (starting with /)"]),
        ({"type": "shared_fs", "host_path": "/a", "storage_path": "/b"},
         ["checkpoint_storage.storage_path: the absolute path '/b' is not inside host_path '/a'; give a path relative "
          "to host_path, or an absolute path inside it"]),
        ({"type": "shared_fs", "host_path": "/a", "propagation": "bad"},
         ["checkpoint_storage.propagation: got 'bad' (a string); one of rprivate, private, rslave, slave, rshared, "
          "shared"]),
        ({"type": "s3"}, ["checkpoint_storage.bucket: missing; a bucket name"]),
        ({"type": "hdfs", "hdfs_url": "x"}, ["checkpoint_storage.hdfs_path: missing; a path in HDFS"]),
        ({"type": "gcs", "bucket": "b", "save_trial_best": -1},
         ["checkpoint_storage.save_trial_best: got -1 (an int); an int >= 0"]),
        ("s3", ["checkpoint_storage: got 's3' (a string); a mapping with type: one of shared_fs, directory, s3, gcs, "
                "azure, hdfs"]),
    ],
)
def test_storage_errors(cfg, expected):
    assert problems(checkpoint_storage=cfg) == expected


def test_unknown_storage_field_suggests():
    (problem,) = problems(checkpoint_storage={"type": "s3", "bucket": "b", "acess_key": "k"})
    assert problem.startswith("checkpoint_storage.acess_key: unknown field (did you mean 'access_key'?)")


def test_tensorboard_storage_has_no_gc_knobs(minimal):
    cfg = load_experiment_config(minimal(tensorboard_storage={"type": "shared_fs", "host_path": "/tb"}))
    assert cfg["tensorboard_storage"] == {"type": "shared_fs", "host_path": "/tb", "storage_path": None,
                                          "propagation": "rprivate"}
    (problem,) = problems(tensorboard_storage={"type": "shared_fs", "host_path": "/tb", "save_trial_best": 1})
    assert problem.startswith("tensorboard_storage.save_trial_best: unknown field")


def test_data_layer(minimal):
    cfg = load_experiment_config(minimal(data_layer={"type": "s3", "bucket": "b", "bucket_directory_path": "p"}))
    assert cfg["data_layer"]["bucket"] == "b" and cfg["data_layer"]["local_cache_host_path"] is None
    assert problems(data_layer={"type": "gcs", "bucket": "b"}) == [
        "data_layer.bucket_directory_path: missing; the directory in the bucket for cached datasets (a string)"
    ]
