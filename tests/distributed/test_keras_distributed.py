"""Two CPU ranks under the launcher train a TFKerasTrial like one slot with the same global batch
(MultiWorkerMirroredStrategy over gRPC on 127.0.0.1)."""
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Dict, List

import numpy as np
import pytest

from determined import _execution, core
from determined import config as det_config

HERE = pathlib.Path(__file__).resolve().parent

pytestmark = pytest.mark.slow

BASE = {
    "entrypoint": "_tf_keras_trials:LinearTrial",
    "hyperparameters": {"global_batch_size": 8, "lr": 0.1},
    "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 24}},
}
VALIDATION_RECORDS = 41


def _config(**overrides: Any) -> Dict[str, Any]:
    cfg = json.loads(json.dumps(BASE))
    cfg.update(overrides)
    return cfg


SCENARIOS: List[Dict[str, Any]] = [
    {"name": "full", "trial": "LinearTrial", "lengths": [8, 24], "config": _config()},
    {"name": "half", "trial": "LinearTrial", "lengths": [12], "config": _config()},
    {"name": "resumed", "trial": "LinearTrial", "lengths": [24], "config": _config(), "resume_from": "half"},
    {"name": "dataset", "trial": "DatasetTrial", "lengths": [16], "config": _config()},
    {"name": "native", "trial": "native_script", "lengths": [12], "config": _config()},
    {"name": "stopped", "trial": "StopOnRankOneTrial", "lengths": [40], "config": _config()},
]


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """Every scenario, run once by 2 ranks (one launch: the TensorFlow cluster is joined once per process)."""
    out = tmp_path_factory.mktemp("tf_keras")
    (out / "scenarios.json").write_text(json.dumps(SCENARIOS))
    env = {**os.environ, "OMP_NUM_THREADS": "2", "DET_COLLECTIVE_TIMEOUT_S": "120", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", "2",
         str(HERE / "_tf_keras_worker.py"), str(out / "scenarios.json"), str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return {s["name"]: json.loads((out / f"{s['name']}.json").read_text()) for s in SCENARIOS}


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """The `full` scenario on one slot, in this process."""
    sys.path.insert(0, str(HERE))
    import _tf_keras_trials
    import _tf_keras_worker

    tmp = tmp_path_factory.mktemp("tf_keras_one")
    config = det_config.load_experiment_config(_config())
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    with core._make_local_context(str(tmp), [8, 24], config, hparams, 5) as context:
        _execution.run_trial(_tf_keras_trials.LinearTrial, context)
    return {
        "training": context.train.training_history,
        "validation": context.train.validation_history,
        "weights": _tf_keras_worker.checkpoint_weights(tmp / context.checkpoint.reported[-1]["uuid"]),
    }


def _assert_same_weights(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert a.keys() == b.keys() and len(a) == 2, (a.keys(), b.keys())
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-5, err_msg=name)


def test_two_slots_converge_and_match_one_slot(two_slots: Dict[str, Any], one_slot: Dict[str, Any]) -> None:
    full = two_slots["full"]
    first, last = (v["metrics"]["val_loss"] for v in full["validation"])
    assert last < 0.01 and last < first / 4, f"validation loss went from {first} to {last}"
    assert [c["steps_completed"] for c in full["checkpoints"]] == [8, 24]
    _assert_same_weights(full["weights"], one_slot["weights"])
    for ours, theirs in zip(full["validation"], one_slot["validation"]):
        assert ours["steps_completed"] == theirs["steps_completed"]
        # Keras sums its metric variables over the ranks: the one-slot values over the whole set.
        for name in ("val_loss", "val_mae"):
            assert ours["metrics"][name] == pytest.approx(theirs["metrics"][name], rel=1e-4, abs=1e-6), name
    # A training metric of a step covers the global batch, on one slot and on two.
    ours = [b["loss"] for m in full["training"] for b in m["batch_metrics"]]
    theirs = [b["loss"] for m in one_slot["training"] for b in m["batch_metrics"]]
    assert len(ours) == 24 and ours == pytest.approx(theirs, rel=1e-4, abs=1e-6)
    assert {b["records"] for m in full["training"] for b in m["batch_metrics"]} == {8.0}


def test_sum_over_shards_counts_every_validation_record_once(two_slots: Dict[str, Any]) -> None:
    for name in ("full", "dataset"):
        for validation in two_slots[name]["validation"]:
            assert validation["metrics"]["val_records"] == VALIDATION_RECORDS, name


def test_resume_continues_exactly(two_slots: Dict[str, Any]) -> None:
    assert two_slots["resumed"]["checkpoints"][-1]["steps_completed"] == 24
    _assert_same_weights(two_slots["resumed"]["weights"], two_slots["full"]["weights"])


def test_only_the_chief_checkpoints(two_slots: Dict[str, Any]) -> None:
    uuids = {c["uuid"] for s in two_slots.values() for c in s["checkpoints"]}
    # Every directory in the storage is a checkpoint the chief reported: rank 1 wrote none there.
    assert set(two_slots["stopped"]["checkpoint_dirs"]) == uuids


def test_a_native_script_building_its_model_at_module_level_trains_like_the_trial(two_slots: Dict[str, Any]) -> None:
    """The Native API script builds its model after init(), outside any strategy scope of its own (as Horovod-era
    scripts did): on two slots it trains as the Trial API's LinearTrial does."""
    native, half = two_slots["native"], two_slots["half"]
    assert [c["steps_completed"] for c in native["checkpoints"]] == [12]
    _assert_same_weights(native["weights"], half["weights"])
    assert native["validation"][-1]["metrics"]["val_records"] == VALIDATION_RECORDS


def test_tf_data_datasets_are_sharded_and_train(two_slots: Dict[str, Any]) -> None:
    dataset = two_slots["dataset"]
    assert dataset["validation"][-1]["metrics"]["val_loss"] < 0.1
    assert {b["records"] for m in dataset["training"] for b in m["batch_metrics"]} == {8.0}


def test_a_stop_requested_on_one_rank_stops_every_rank(two_slots: Dict[str, Any]) -> None:
    stopped = two_slots["stopped"]
    assert [c["steps_completed"] for c in stopped["checkpoints"]] == [5]
    assert stopped["training"][-1]["steps_completed"] == 5


def test_a_dying_worker_takes_the_trial_down_without_a_hang(tmp_path: pathlib.Path) -> None:
    scenarios = [{"name": "died", "trial": "DieOnRankOneTrial", "lengths": [40], "config": _config()}]
    (tmp_path / "scenarios.json").write_text(json.dumps(scenarios))
    env = {**os.environ, "OMP_NUM_THREADS": "2", "DET_COLLECTIVE_TIMEOUT_S": "120", "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", "2",
         str(HERE / "_tf_keras_worker.py"), str(tmp_path / "scenarios.json"), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rank 1 exited with status 3" in proc.stdout
    assert time.monotonic() - start < 90
    assert not (tmp_path / "died.json").exists()
