"""Two CPU ranks under the launcher train an EstimatorTrial (graph-mode CollectiveAllReduceStrategy over
gRPC on 127.0.0.1): convergence, exact cross-slot metrics, chief-only checkpoints and exports."""
import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import numpy as np
import pytest

from determined import _execution, core
from determined import config as det_config

HERE = pathlib.Path(__file__).resolve().parent

pytestmark = pytest.mark.slow

BASE = {
    "entrypoint": "_tf_estimator_trials:LinearTrial",
    "hyperparameters": {"global_batch_size": 8, "lr": 0.1},
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 24}},
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
    {"name": "averaged", "trial": "LinearTrial", "lengths": [4],
     "config": _config(optimizations={"average_training_metrics": True})},
]


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp("tf_estimator")
    (out / "scenarios.json").write_text(json.dumps(SCENARIOS))
    env = {**os.environ, "OMP_NUM_THREADS": "2", "DET_COLLECTIVE_TIMEOUT_S": "120", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", "2",
         str(HERE / "_tf_estimator_worker.py"), str(out / "scenarios.json"), str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return {s["name"]: json.loads((out / f"{s['name']}.json").read_text()) for s in SCENARIOS}


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """The `full` scenario on one slot, in this process."""
    sys.path.insert(0, str(HERE))
    import _tf_estimator_trials
    import _tf_estimator_worker

    tmp = tmp_path_factory.mktemp("tf_estimator_one")
    config = det_config.load_experiment_config(_config())
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    with core._make_local_context(str(tmp), [8, 24], config, hparams, 5) as context:
        _execution.run_trial(_tf_estimator_trials.LinearTrial, context)
    return {
        "training": context.train.training_history,
        "weights": _tf_estimator_worker.checkpoint_weights(tmp / context.checkpoint.reported[-1]["uuid"]),
    }


def test_two_slots_converge_and_match_one_slot(two_slots: Dict[str, Any], one_slot: Dict[str, Any]) -> None:
    full = two_slots["full"]
    first, last = (v["metrics"]["loss"] for v in full["validation"])
    assert last < 0.01 and last < first / 4, f"validation loss went from {first} to {last}"
    assert [c["steps_completed"] for c in full["checkpoints"]] == [8, 24]
    # Records sharded by wrap_dataset, per-slot batches of 4: each step trains the 8 records of the
    # one-slot batch, and the strategy averages the two slots' gradients.
    for name in ("w", "b"):
        np.testing.assert_allclose(full["weights"][name], one_slot["weights"][name], rtol=0, atol=1e-5, err_msg=name)


def test_sum_over_shards_counts_every_validation_record_once(two_slots: Dict[str, Any]) -> None:
    for validation in two_slots["full"]["validation"]:
        assert validation["metrics"]["records"] == VALIDATION_RECORDS


def test_only_the_chief_checkpoints_and_exports(two_slots: Dict[str, Any]) -> None:
    uuids = {c["uuid"] for s in two_slots.values() for c in s["checkpoints"]}
    assert set(two_slots["averaged"]["checkpoint_dirs"]) == uuids
    assert all(two_slots["full"]["exports"]) and len(two_slots["full"]["exports"]) == 2


def test_training_loss_covers_the_global_batch(two_slots: Dict[str, Any], one_slot: Dict[str, Any]) -> None:
    # The strategy reduces the loss of a step over the replicas: the one-slot loss of the same 8 records,
    # on the chief and (the same) averaged over the ranks.
    theirs = [b["loss"] for m in one_slot["training"] for b in m["batch_metrics"]]
    ours = [b["loss"] for m in two_slots["full"]["training"] for b in m["batch_metrics"]]
    averaged = [b["loss"] for m in two_slots["averaged"]["training"] for b in m["batch_metrics"]]
    assert len(ours) == 24 and ours == pytest.approx(theirs, rel=1e-4, abs=1e-6)
    assert averaged == pytest.approx(theirs[:4], rel=1e-4, abs=1e-6)


def test_resume_continues_exactly(two_slots: Dict[str, Any]) -> None:
    assert two_slots["resumed"]["checkpoints"][-1]["steps_completed"] == 24
    for name in ("w", "b"):
        np.testing.assert_allclose(two_slots["resumed"]["weights"][name], two_slots["full"]["weights"][name],
                                   rtol=0, atol=1e-5, err_msg=name)
