"""A real experiment whose checkpoints live in S3 (a moto server): stored there, GC'd there, restored from there."""
import pathlib

import pytest

from tests.client import _cli as in_process
from tests.e2e._helpers import copy_example, det, det_json, small_config
from tests.storage import _moto
from tests.storage._moto import MotoS3

moto_s3 = _moto.moto_s3  # the session fixture: one moto server for every module that uses it

pytestmark = pytest.mark.slow


def _objects_by_checkpoint(moto: MotoS3, bucket: str, prefix: str) -> dict:
    by_uuid: dict = {}
    for key in moto.keys(bucket, prefix + "/"):
        uuid, _, rel = key[len(prefix) + 1:].partition("/")
        by_uuid.setdefault(uuid, set()).add(rel)
    return by_uuid


def test_experiment_checkpoints_to_s3_and_warm_starts_from_it(
    moto_s3: MotoS3, tmp_path: pathlib.Path, det_data_dir: pathlib.Path
) -> None:
    bucket = moto_s3.new_bucket("det-e2e")
    model_dir = copy_example(tmp_path)
    storage_cfg = {**moto_s3.storage_config(bucket, prefix="runs"), "save_trial_best": 1, "save_trial_latest": 1}
    first = small_config(
        tmp_path, "const.yaml",
        hyperparameters={"learning_rate": 0.01},
        searcher={"max_length": {"batches": 40}},
        min_checkpoint_period={"batches": 20},
        min_validation_period={"batches": 40},
        scheduling_unit=20,
        checkpoint_storage=storage_cfg,
    )
    proc = det("experiment", "create", str(first), str(model_dir), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Each `det` call costs seconds (a Python start): read each experiment's only trial (ids 1, 2) once.
    detail = det_json("trial", "describe", "1")
    assert detail["experiment_id"] == 1
    assert detail["state"] == "COMPLETED" and detail["total_batches"] == 40
    ckpts = {c["steps_completed"]: c for c in detail["checkpoints"]}
    assert set(ckpts) == {20, 40}
    assert ckpts[40]["state"] == "COMPLETED" and ckpts[40]["storage"]["type"] == "s3"
    # GC at the end of the experiment removed the checkpoint at 20 (no validation, not the latest) from S3.
    assert ckpts[20]["state"] == "DELETED"
    final = ckpts[40]["uuid"]
    stored = _objects_by_checkpoint(moto_s3, bucket, "runs")
    assert set(stored) == {final}
    assert stored[final] == set(ckpts[40]["resources"]) | {".det-complete"}
    assert not (det_data_dir / "checkpoints").exists() or not any((det_data_dir / "checkpoints").iterdir())
    final_accuracy = detail["validation_metrics"][-1]["metrics"]["validation_accuracy"]
    assert final_accuracy > 0.8
    # The keys are hidden from clients: the download goes through the master, which reads the bucket.
    assert ckpts[40]["storage"]["secret_key"] == "********"
    downloaded = tmp_path / "downloaded"
    in_process.det("checkpoint", "download", final, "-o", str(downloaded), check=True)
    for rel, size in ckpts[40]["resources"].items():
        if not rel.endswith("/") and rel != "metadata.json":  # the download writes its own (with the metadata)
            assert (downloaded / rel).stat().st_size == size, rel

    # A second experiment warm-starts from the checkpoint in S3 and trains one batch: it scores about what the
    # first experiment's final weights scored (one batch from fresh weights scores far less).
    second = small_config(
        tmp_path, "const.yaml",
        hyperparameters={"learning_rate": 0.01},
        searcher={"max_length": {"batches": 1}, "source_checkpoint_uuid": final},
        min_validation_period={"batches": 1},
        scheduling_unit=1,
        checkpoint_storage=storage_cfg,
    )
    proc = det("experiment", "create", str(second), str(model_dir), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    detail2 = det_json("trial", "describe", "2")
    assert detail2["experiment_id"] == 2 and detail2["state"] == "COMPLETED"
    [validation] = detail2["validation_metrics"]
    assert validation["steps_completed"] == 1
    assert validation["metrics"]["validation_accuracy"] == pytest.approx(final_accuracy, abs=0.05)
    [ckpt2] = [c for c in detail2["checkpoints"] if c["state"] == "COMPLETED"]
    assert set(_objects_by_checkpoint(moto_s3, bucket, "runs")) == {final, ckpt2["uuid"]}
