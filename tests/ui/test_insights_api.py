"""The JSON routes the UI reads besides the CLI's: every trial's metrics, hyperparameter importance, searcher
progress (ASHA rungs), cluster slots."""
from typing import Any, Dict

import pytest

pytestmark = pytest.mark.slow


def test_experiment_metrics_hold_every_report(ui_master: Dict[str, Any]) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    answer = api.get(f"/experiments/{asha}/metrics")
    assert answer["metric_names"] == {"training": ["loss", "lr"], "validation": ["accuracy", "validation_loss"]}
    assert len(answer["trials"]) == 6
    for t in answer["trials"]:
        described = api.get(f"/trials/{t['trial_id']}")
        assert [r["steps_completed"] for r in t["training"]] == [r["steps_completed"] for r in described["training_metrics"]]
        assert [r["metrics"] for r in t["validation"]] == [r["metrics"] for r in described["validation_metrics"]]


def test_asha_progress_counts_trials_per_rung(ui_master: Dict[str, Any]) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    progress = api.get(f"/experiments/{asha}/searcher_progress")
    assert progress["name"] == "adaptive_asha" and progress["unit"] == "batches"
    assert progress["trials_by_state"] == {"COMPLETED": 6}
    (bracket,) = progress["brackets"]
    rungs = bracket["rungs"]
    assert [r["length"] for r in rungs] == [4, 8, 16]
    assert len(rungs[0]["reported"]) == 6 and all(not r["in_progress"] for r in rungs)
    trials = {t["id"]: t for t in api.get(f"/experiments/{asha}")["trials"]}
    for index, rung in enumerate(rungs):
        for entry in rung["reported"]:
            # a trial reported in a rung trained to its length, and its metric there is the one it validated
            assert trials[entry["trial_id"]]["total_batches"] >= rung["length"]
            validations = api.get(f"/trials/{entry['trial_id']}")["validation_metrics"]
            at = [v["metrics"]["validation_loss"] for v in validations if v["steps_completed"] == rung["length"]]
            assert entry["metric"] == pytest.approx(at[0])
        if index + 1 < len(rungs):  # the next rung holds exactly the trials promoted from this one
            promoted = {e["trial_id"] for e in rung["reported"] if e["promoted"]}
            assert promoted == {e["trial_id"] for e in rungs[index + 1]["reported"]}


def test_importance_route(ui_master: Dict[str, Any]) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    answer = api.get(f"/experiments/{asha}/hyperparameter_importance")
    assert answer["metric"] == "validation_loss" and answer["num_trials"] == 6
    assert set(answer["importance"]) == {"x", "extra.noise", "lr", "batch"}  # nested ones under dotted names
    assert all(0.0 <= v <= 1.0 for v in answer["importance"].values())
    other = api.get(f"/experiments/{asha}/hyperparameter_importance", metric="accuracy")
    assert other["metric"] == "accuracy" and other["num_trials"] == 6
    assert api.client.get("/experiments/99999/hyperparameter_importance").status_code == 404


def test_cluster_slots_name_the_running_trial(ui_master: Dict[str, Any]) -> None:
    api, running = ui_master["api"], ui_master["running"]
    slots = api.wait(lambda: (lambda s: s if s["used"] else None)(api.get("/cluster/slots")), 60, "a running trial")
    assert slots["total"] == 4 and slots["kind"] == "cpu"
    (allocation,) = slots["allocations"]
    assert allocation["experiment_id"] == running and allocation["owner"] == "determined"
    assert allocation["slots"] == 1 and len(allocation["slot_ids"]) == 1 and allocation["pid"] > 0
    assert api.client.get("/cluster/slots", headers={"Authorization": ""}).status_code == 401


def test_metrics_carry_times_and_groups(ui_master: Dict[str, Any]) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    answer = api.get(f"/experiments/{asha}/metrics")
    assert answer["groups"] == ["training", "validation"]
    for t in answer["trials"]:
        assert t["start_time"] and all(p["end_time"] >= t["start_time"] for p in t["training"] + t["validation"])


def test_model_files_of_an_experiment(ui_master: Dict[str, Any]) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    answer = api.get(f"/experiments/{asha}/model_files")
    assert answer == {"files": [{"path": "model.py", "size": 18, "text": "class T:\n    pass\n"}], "truncated": False}
    assert api.client.get("/experiments/99999/model_files").status_code == 404

