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



def test_experiment_metrics_downsample_to_the_asked_point_count(ui_master: Dict[str, Any]) -> None:
    from determined.master.insights import curves

    api, asha = ui_master["api"], ui_master["asha"]
    answer = api.get(f"/experiments/{asha}/metrics", max_points=4)
    assert answer["max_points"] == 4
    for t in answer["trials"]:
        full = api.get(f"/trials/{t['trial_id']}/metrics", group="training")["metrics"]
        kept = curves.downsample([p["metrics"] for p in full], 4)
        assert [p["steps_completed"] for p in t["training"]] == [full[i]["steps_completed"] for i in kept]
        assert t["training"][0]["steps_completed"] == full[0]["steps_completed"]
        assert t["training"][-1]["steps_completed"] == full[-1]["steps_completed"]
        losses = [p["metrics"]["loss"] for p in full]
        assert {min(losses), max(losses)} <= {p["metrics"]["loss"] for p in t["training"]}
        one = api.get(f"/trials/{t['trial_id']}/metrics", group="training", max_points=4)["metrics"]
        assert [p["steps_completed"] for p in one] == [p["steps_completed"] for p in t["training"]]
    for bad in ("3", "100000", "all"):
        for path in (f"/experiments/{asha}/metrics", f"/trials/{answer['trials'][0]['trial_id']}/metrics"):
            resp = api.client.get(path, params={"max_points": bad, "group": "training"})
            assert resp.status_code == 400, resp.text
            assert "expected an integer from 4 to 5000" in resp.text


def test_cached_curves_follow_new_reports(ui_master: Dict[str, Any]) -> None:
    api, running = ui_master["api"], ui_master["running"]

    def points() -> int:
        return len(api.get(f"/experiments/{running}/metrics")["trials"][0]["training"])

    before = points()
    api.wait(lambda: points() > before, 60, "a new training report in the experiment's curves")
