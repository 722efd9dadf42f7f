"""ASHA and PBT through the whole platform: real trial processes of the digits example, embedded master."""
import pathlib
from typing import Any, Dict, List

import pytest

from tests.e2e._helpers import EXAMPLE, det, det_json, small_config

pytestmark = pytest.mark.slow


def _trials(experiment_id: int) -> List[Dict[str, Any]]:
    desc = det_json("experiment", "describe", str(experiment_id))
    return [det_json("trial", "describe", str(t["id"])) for t in desc["trials"]]


def test_asha_stops_trials_at_different_rungs(tmp_path: pathlib.Path) -> None:
    cfg = small_config(
        tmp_path, "adaptive.yaml",
        hyperparameters={"global_batch_size": 32},
        searcher={"max_trials": 4, "max_length": {"batches": 32}, "mode": "aggressive", "divisor": 2},
        min_validation_period={"batches": 0}, scheduling_unit=4,
    )
    # A slot per trial: no trial is preempted while it waits for a promotion, so each starts one process.
    proc = det("experiment", "create", "--cpu-slots", "4", str(cfg), str(EXAMPLE), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["progress"] == 1.0
    trials = _trials(exp["id"])
    assert len(trials) == 4
    assert {t["state"] for t in trials} == {"COMPLETED"}
    rungs = [8, 16, 32]  # aggressive, divisor 2, 4 trials: 3 rungs (see `det preview-search`)
    lengths = sorted(t["total_batches"] for t in trials)
    assert set(lengths) <= set(rungs), lengths
    # 4 trials reach rung 0, then the best 2 and 1 go on (asynchronously the counts can only be at least these:
    # a promotion never comes back); at most 3 of 4 and 2 of 3 are ever promoted, so every rung keeps a trial.
    assert lengths.count(32) >= 1 and len(set(lengths)) == 3, lengths
    for t in trials:
        validated = [v["steps_completed"] for v in t["validation_metrics"]]
        assert validated == [r for r in rungs if r <= t["total_batches"]], (t["id"], validated)
    # Only a trial that was among the best of its rung went further.
    at_8 = {t["id"]: t["validation_metrics"][0]["metrics"]["validation_accuracy"] for t in trials}
    promoted = {t["id"] for t in trials if t["total_batches"] > 8}
    assert any(at_8[i] == max(at_8.values()) for i in promoted), (at_8, promoted)  # (ties: any of the best)


def test_pbt_clones_resume_from_their_parents_checkpoints(tmp_path: pathlib.Path) -> None:
    cfg = small_config(
        tmp_path, "pbt.yaml",
        searcher={"population_size": 4, "num_rounds": 3, "length_per_round": {"batches": 8},
                  "replace_function": {"truncate_fraction": 0.25},
                  "explore_function": {"resample_probability": 0.3, "perturb_factor": 0.2}},
        scheduling_unit=4,
    )
    # A slot per member: a member that waits for the others' round keeps its process instead of being
    # preempted and started again (a clone waits for the member it replaces to close, so 4 are enough).
    proc = det("experiment", "create", "--cpu-slots", "4", str(cfg), str(EXAMPLE), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED"
    trials = _trials(exp["id"])
    # 4 members, one truncated and replaced by a clone after rounds 1 and 2.
    assert len(trials) == 6
    checkpoints = {c["uuid"]: c for t in trials for c in t["checkpoints"]}
    clones = [t for t in trials if t["warm_start_checkpoint_uuid"]]
    assert len(clones) == 2
    for clone in clones:
        parent_ckpt = checkpoints[clone["warm_start_checkpoint_uuid"]]
        parent = next(t for t in trials if t["id"] == parent_ckpt["trial_id"])
        assert parent_ckpt["steps_completed"] % 8 == 0 and parent_ckpt["steps_completed"] > 0
        # The clone continued from its parent's batch: its first validation is one round later.
        first = clone["validation_metrics"][0]["steps_completed"]
        assert first == parent_ckpt["steps_completed"] + 8
        assert min(m["steps_completed"] for m in clone["training_metrics"]) > parent_ckpt["steps_completed"]
        # Explored hyperparameters: the constants stay, the searched ones stay inside their ranges.
        assert clone["hparams"]["hidden_size"] == parent["hparams"]["hidden_size"] == 128
        assert 10 ** -4 <= clone["hparams"]["learning_rate"] <= 10 ** -1.5
        assert 0.0 <= clone["hparams"]["dropout"] <= 0.5
    # Every member that lived to the end trained all three rounds' worth of batches.
    assert max(t["total_batches"] for t in trials) == 24
    population_at_end = [t for t in trials if t["total_batches"] == 24]
    assert len(population_at_end) == 4
