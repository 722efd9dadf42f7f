"""Two CPU ranks under the launcher train like one slot with the same global batch (gloo + DDP)."""
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
import _ddp_trials

HERE = pathlib.Path(__file__).resolve().parent

BASE = {
    "entrypoint": "_ddp_trials:LinearTrial",
    "hyperparameters": {"global_batch_size": 8, "lr": 0.1},
    "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 24}},
}


def _config(**overrides: Any) -> Dict[str, Any]:
    cfg = json.loads(json.dumps(BASE))
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    return cfg


SCENARIOS: List[Dict[str, Any]] = [
    {"name": "full", "trial": "LinearTrial", "lengths": [8, 24], "config": _config()},
    {"name": "half", "trial": "LinearTrial", "lengths": [12], "config": _config()},
    {"name": "resumed", "trial": "LinearTrial", "lengths": [24], "config": _config(), "resume_from": "half"},
    # 2 slots x 2 records per batch x 2 aggregated batches = one update over 8 records, as gbs 8.
    {"name": "aggregated", "trial": "LinearTrial", "lengths": [48],
     "config": _config(hyperparameters={"global_batch_size": 4}, optimizations={"aggregation_frequency": 2})},
    {"name": "averaged", "trial": "LinearTrial", "lengths": [4],
     "config": _config(optimizations={"average_training_metrics": True})},
    {"name": "full_dataset", "trial": "FullDatasetTrial", "lengths": [2], "config": _config()},
    {"name": "stopped", "trial": "StopOnRankOneTrial", "lengths": [40],
     "config": _config(hyperparameters={"sleep": 0.05})},
    {"name": "reducers", "trial": "ReducerTrial", "lengths": [4, 8], "config": _config()},
    {"name": "horovod", "trial": "HorovodTrial", "lengths": [2], "config": _config()},
]


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """Every scenario, run once by 2 ranks (one launch: the process group is reused across scenarios)."""
    out = tmp_path_factory.mktemp("ddp")
    (out / "scenarios.json").write_text(json.dumps(SCENARIOS))
    env = {**os.environ, "OMP_NUM_THREADS": "2", "DET_COLLECTIVE_TIMEOUT_S": "120", "DDP_TEST_OUT": str(out)}
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", "2",
         str(HERE / "_ddp_worker.py"), str(out / "scenarios.json"), str(out)],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {s["name"]: json.loads((out / f"{s['name']}.json").read_text()) for s in SCENARIOS}
    results["uploads"] = [(out / f"uploads-rank{rank}.txt").read_text().split() for rank in (0, 1)]
    return results


def _one_slot(tmp_path: pathlib.Path, raw: Dict[str, Any], lengths: List[int]) -> Dict[str, Any]:
    config = det_config.load_experiment_config(raw)
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    import torch

    with core._make_local_context(str(tmp_path), lengths, config, hparams, 5) as context:
        _execution.run_trial(_ddp_trials.LinearTrial, context)
    state = torch.load(tmp_path / context.checkpoint.reported[-1]["uuid"] / "state_dict.pth", weights_only=False)
    return {
        "validation": context.train.validation_history,
        "weights": {k: v.tolist() for k, v in state["models_state_dict"][0].items()},
    }


def _assert_same_weights(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-5, err_msg=name)


def test_two_slots_converge_and_match_one_slot(two_slots: Dict[str, Any], tmp_path: pathlib.Path) -> None:
    full = two_slots["full"]
    first, last = (v["metrics"]["val_loss"] for v in full["validation"])
    assert last < 0.1 and last < first / 4, f"validation loss went from {first} to {last}"
    assert [c["steps_completed"] for c in full["checkpoints"]] == [8, 24]

    reference = _one_slot(tmp_path, _config(), [8, 24])
    _assert_same_weights(full["weights"], reference["weights"])
    for ours, theirs in zip(full["validation"], reference["validation"]):
        assert ours["steps_completed"] == theirs["steps_completed"]
        # AVG weighted by each rank's batches, MAX over ranks: the one-slot values over the whole set.
        assert ours["metrics"]["val_loss"] == pytest.approx(theirs["metrics"]["val_loss"], abs=1e-5)
        assert ours["metrics"]["max_abs_error"] == pytest.approx(theirs["metrics"]["max_abs_error"], abs=1e-5)
        # A custom reducer's cross_slot_reduce sees every slot's accumulated value: the exact MSE per record.
        assert ours["metrics"]["mse"] == pytest.approx(theirs["metrics"]["mse"], abs=1e-5)


def test_sum_over_shards_counts_every_validation_record_once(two_slots: Dict[str, Any]) -> None:
    for validation in two_slots["full"]["validation"]:
        assert validation["metrics"]["records"] == _ddp_trials.VALIDATION_RECORDS


def test_resume_continues_exactly(two_slots: Dict[str, Any]) -> None:
    assert two_slots["resumed"]["checkpoints"][-1]["steps_completed"] == 24
    _assert_same_weights(two_slots["resumed"]["weights"], two_slots["full"]["weights"])


def test_aggregation_frequency_equals_the_bigger_batch(two_slots: Dict[str, Any]) -> None:
    _assert_same_weights(two_slots["aggregated"]["weights"], two_slots["full"]["weights"])


def test_training_metrics_from_the_chief_or_averaged(two_slots: Dict[str, Any]) -> None:
    assert {m["metrics"]["rank"] for m in two_slots["full"]["training"]} == {0.0}
    averaged = two_slots["averaged"]["training"]
    assert {m["metrics"]["rank"] for m in averaged} == {0.5}
    assert all(b["rank"] == 0.5 for m in averaged for b in m["batch_metrics"])


def test_evaluate_full_dataset_runs_on_the_chief_only(two_slots: Dict[str, Any]) -> None:
    metrics = two_slots["full_dataset"]["validation"][-1]["metrics"]
    assert metrics["rank"] == 0 and metrics["records"] == _ddp_trials.VALIDATION_RECORDS


def test_a_stop_requested_on_one_rank_stops_every_rank(two_slots: Dict[str, Any]) -> None:
    # The ranks agree on stopping about every 0.5 s of training (10 batches of 0.05 s here), all after the
    # same batch: the chief checkpoints there and nobody waits for a rank that went on.
    stopped = two_slots["stopped"]
    steps = [c["steps_completed"] for c in stopped["checkpoints"]]
    assert len(steps) == 1 and 5 <= steps[0] < 40, steps
    assert stopped["training"][-1]["steps_completed"] == steps[0]


def test_reducers_are_reduced_per_slot_then_across_slots(two_slots: Dict[str, Any]) -> None:
    reducers = two_slots["reducers"]
    # 4 batches of 8 records (4 per slot) per training period, summed over the slots.
    assert [r["metrics"]["records_trained"] for r in reducers["training"]] == [32, 32]
    # 11 validation batches, 6 on rank 0 and 5 on rank 1, back in their order.
    assert [v["metrics"]["in_batch_order"] for v in reducers["validation"]] == [1.0, 1.0]
    assert all("in_batch_order" not in r["metrics"] for r in reducers["training"])


def test_every_rank_hears_each_checkpoint_upload(two_slots: Dict[str, Any]) -> None:
    chief, other = two_slots["uploads"]
    assert chief == other == [c["uuid"] for c in two_slots["reducers"]["checkpoints"]]
    assert len(chief) >= 1


def test_horovod_handle_of_0_20_trials_runs_over_the_process_group(two_slots: Dict[str, Any]) -> None:
    """`from determined.horovod import hvd` (0.12-0.20 trial code): Horovod's collectives over the 2 ranks."""
    metrics = two_slots["horovod"]["training"][-1]["metrics"]
    assert metrics["hvd_size"] == 2
    assert metrics["hvd_mean_rank"] == 0.5  # Horovod's allreduce averages by default
    assert metrics["hvd_sum_rank"] == 1.0
    assert metrics["hvd_gathered_rows"] == 3  # 1 row from rank 0, 2 from rank 1
    assert metrics["hvd_gathered_in_rank_order"] == 1.0
    assert metrics["hvd_broadcast_shift"] == 1.0  # rank 1's value everywhere
    assert metrics["hvd_objects_in_rank_order"] == 1.0
