"""The master's REST API in-process (no scheduler, no processes)."""
import base64
import os
import pathlib
from typing import Any, Dict

import pytest

from determined import errors
from determined.common.api import Session
from determined.master import in_process_session

from ._helpers import config, model_def


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Session:
    return in_process_session(tmp_path / "data")


def create(session: Session, cfg: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    return session.post("/experiments", {"config": cfg, "model_definition": model_def(), **extra})["experiment"]


def test_master_info(session: Session, tmp_path: pathlib.Path) -> None:
    info = session.get("/master/info")
    assert info["version"] and info["data_dir"] == str((tmp_path / "data").resolve())


def test_create_fills_defaults_and_creates_trials(session: Session, tmp_path: pathlib.Path) -> None:
    exp = create(session, config(max_trials=3))
    assert exp["state"] == "ACTIVE" and exp["num_trials"] == 3 and exp["progress"] == 0.0
    assert exp["searcher_metric"] == "loss" and exp["smaller_is_better"] is True
    storage = exp["config"]["checkpoint_storage"]
    assert storage["type"] == "shared_fs" and storage["host_path"] == str((tmp_path / "data").resolve())
    assert storage["storage_path"] == "checkpoints"
    assert isinstance(exp["config"]["reproducibility"]["experiment_seed"], int)
    described = session.get(f"/experiments/{exp['id']}")
    trials = described["trials"]
    assert [t["state"] for t in trials] == ["ACTIVE"] * 3
    assert len({t["request_id"] for t in trials}) == 3
    assert all(0 <= t["hparams"]["x"] <= 1 and t["hparams"]["global_batch_size"] == 4 for t in trials)
    assert session.get("/experiments")["experiments"][0]["id"] == exp["id"]
    assert base64.b64decode(session.get(f"/experiments/{exp['id']}/model_def")["b64_tgz"]) == base64.b64decode(model_def())


def test_same_seed_same_hparams(session: Session) -> None:
    cfg = config(max_trials=3, reproducibility={"experiment_seed": 42})
    a, b = create(session, cfg), create(session, cfg)
    hp = lambda e: [(t["hparams"], t["seed"]) for t in session.get(f"/experiments/{e['id']}")["trials"]]  # noqa: E731
    assert hp(a) == hp(b)


def test_bad_config_lists_problems_and_stores_nothing(session: Session) -> None:
    cfg = config()
    cfg["searcher"]["max_trials"] = -1
    cfg["max_restarts"] = "many"
    with pytest.raises(errors.APIError) as info:
        create(session, cfg)
    assert info.value.status_code == 400
    assert len(info.value.problems) >= 2
    assert any("max_restarts" in p for p in info.value.problems)
    assert session.get("/experiments")["experiments"] == []


@pytest.mark.parametrize("searcher, needle", [
    ({"name": "adaptive_asha", "max_trials": 4, "divisor": 1}, "searcher.divisor"),
    ({"name": "pbt", "population_size": 4, "num_rounds": 2, "length_per_round": {"batches": 5},
      "replace_function": {"truncate_fraction": 0.7},
      "explore_function": {"resample_probability": 0.2, "perturb_factor": 0.2}}, "truncate_fraction"),
    ({"name": "grid"}, "count"),
])
def test_bad_searcher_configs_are_a_400_and_store_nothing(session: Session, searcher: Dict[str, Any], needle: str) -> None:
    cfg = config()
    cfg["hyperparameters"]["lr"] = {"type": "double", "minval": 0.01, "maxval": 0.1}
    cfg["searcher"] = {"metric": "loss", "max_length": {"batches": 10}, **searcher}
    if searcher["name"] == "pbt":
        del cfg["searcher"]["max_length"]
    with pytest.raises(errors.APIError) as info:
        create(session, cfg)
    assert needle in str(info.value), str(info.value)
    assert session.get("/experiments")["experiments"] == []


@pytest.mark.parametrize("definition, needle", [
    ("not base64!!", "base64"),
    (base64.b64encode(b"plain bytes").decode(), ".tar.gz"),
    (model_def({"other.py": "x = 1\n"}), "model.py"),
])
def test_bad_model_def_is_refused(session: Session, definition: str, needle: str) -> None:
    with pytest.raises(errors.APIError) as info:
        session.post("/experiments", {"config": config(), "model_definition": definition})
    assert info.value.status_code == 400
    assert needle in str(info.value)
    assert session.get("/experiments")["experiments"] == []


def test_entrypoint_package_init_is_accepted(session: Session) -> None:
    cfg = config(entrypoint="pkg.sub:T")
    files = {"./pkg/sub/__init__.py": "class T:\n    pass\n"}
    exp = session.post("/experiments", {"config": cfg, "model_definition": model_def(files)})
    assert exp["experiment"]["id"] == 1


def test_unknown_ids_are_404(session: Session) -> None:
    for path in ("/experiments/99", "/trials/99", "/checkpoints/nope", "/trials/99/logs"):
        with pytest.raises(errors.NotFoundError):
            session.get(path)


# Checkpoint uuids (the master takes only UUIDs)
CK1 = "6b1f0c9e-2a47-4d3b-9c8e-1f2a3b4c5d6e"
WARM = "0e5d4c3b-2a19-4f8e-8d7c-6b5a49382716"
PARENT_CK = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def test_trial_protocol_and_checkpoints(session: Session) -> None:
    # a Core API script (a Trial class's validation without the searcher metric ends the search: test_wrong_metric.py)
    exp = create(session, config(max_trials=2, length=20, entrypoint="python3 model.py"))
    t1, t2 = [t["id"] for t in session.get(f"/experiments/{exp['id']}")["trials"]]
    ctx = session.get(f"/trials/{t1}/context")
    assert ctx["latest_checkpoint"] is None and ctx["steps_completed"] == 0 and ctx["config"]["searcher"]["metric"] == "loss"
    assert session.get(f"/trials/{t1}/searcher/operation") == {"length": 20, "searcher_length": 20}
    session.post(f"/trials/{t1}/training_metrics", {"steps_completed": 10, "metrics": {"loss": 1.0}, "batch_metrics": [{"loss": 1.0}]})
    # a Core API validation without the searcher metric is stored (as Determined 0.26 did) but is never the best
    assert session.post(f"/trials/{t1}/validation_metrics", {"steps_completed": 10, "metrics": {"accuracy": 0.5}}) == {"is_best": False}
    assert session.get(f"/trials/{t1}")["trial"]["best_validation"] is None
    assert session.post(f"/trials/{t1}/validation_metrics", {"steps_completed": 20, "metrics": {"loss": 0.5}}) == {"is_best": True}
    session.post(f"/trials/{t1}/checkpoints", {"uuid": CK1, "steps_completed": 20, "resources": {"a.pth": 10},
                                              "framework": "torch-2", "format": "cloudpickle", "metadata": {"k": 1}})
    with pytest.raises(errors.APIError):
        session.post(f"/trials/{t1}/searcher/completed_operation", {"length": 15, "metric": 0.5})
    session.post(f"/trials/{t1}/searcher/completed_operation", {"length": 20, "metric": 0.5})
    assert session.get(f"/trials/{t1}/searcher/operation") == {"completed": True}
    assert session.get(f"/experiments/{exp['id']}")["experiment"]["progress"] == pytest.approx(0.5)
    # a second trial's worse validation is not the best; a better one is
    assert session.post(f"/trials/{t2}/validation_metrics", {"steps_completed": 20, "metrics": {"loss": 0.7}}) == {"is_best": False}
    assert session.post(f"/trials/{t2}/validation_metrics", {"steps_completed": 20, "metrics": {"loss": 0.1}}) == {"is_best": True}

    ckpt = session.get(f"/checkpoints/{CK1}")["checkpoint"]
    assert ckpt["trial_id"] == t1 and ckpt["state"] == "COMPLETED" and ckpt["steps_completed"] == 20
    assert ckpt["validation_metrics"] == {"loss": 0.5} and ckpt["metadata"] == {"k": 1}
    assert ckpt["storage"]["type"] == "shared_fs" and ckpt["hparams"]["global_batch_size"] == 4
    assert [c["uuid"] for c in session.get(f"/experiments/{exp['id']}/checkpoints")["checkpoints"]] == [CK1]
    assert session.get(f"/trials/{t1}/context")["latest_checkpoint"] == {"uuid": CK1, "steps_completed": 20}
    detail = session.get(f"/trials/{t1}")
    assert detail["trial"]["latest_checkpoint_uuid"] == CK1 and detail["trial"]["best_validation"] == 0.5
    assert [m["steps_completed"] for m in detail["training_metrics"]] == [10]
    described = session.get(f"/experiments/{exp['id']}")["experiment"]
    assert described["best_validation"] == 0.1 and described["best_trial_id"] == t2

    # a made-up token is refused
    stale = Session(session.master, token="not-the-token", client=session._client)
    with pytest.raises(errors.APIError) as info:
        stale.get(f"/trials/{t1}/searcher/operation")
    assert info.value.status_code == 401
    assert session.get("/allocations/unknown/signals/preemption") == {"preempt": True}


def test_pause_activate_cancel_kill_without_running_trials(session: Session) -> None:
    exp = create(session, config(max_trials=2))
    eid = exp["id"]
    assert session.post(f"/experiments/{eid}/pause")["experiment"]["state"] == "PAUSED"
    assert {t["state"] for t in session.get(f"/experiments/{eid}")["trials"]} == {"PAUSED"}
    assert session.post(f"/experiments/{eid}/activate")["experiment"]["state"] == "ACTIVE"
    assert {t["state"] for t in session.get(f"/experiments/{eid}")["trials"]} == {"ACTIVE"}
    assert session.post(f"/experiments/{eid}/cancel")["experiment"]["state"] == "CANCELED"
    assert {t["state"] for t in session.get(f"/experiments/{eid}")["trials"]} == {"CANCELED"}
    with pytest.raises(errors.APIError):
        session.post(f"/experiments/{eid}/activate")
    other = create(session, config(max_trials=1), activate=False)
    assert other["state"] == "PAUSED"
    assert session.post(f"/experiments/{other['id']}/kill")["experiment"]["state"] == "CANCELED"


def test_kill_trial_goes_on_with_the_experiment(session: Session) -> None:
    exp = create(session, config(max_trials=2, length=10))
    t1, t2 = [t["id"] for t in session.get(f"/experiments/{exp['id']}")["trials"]]
    assert session.post(f"/trials/{t1}/kill")["trial"]["state"] == "CANCELED"
    assert session.get(f"/experiments/{exp['id']}")["experiment"]["state"] == "ACTIVE"
    session.post(f"/trials/{t2}/validation_metrics", {"steps_completed": 10, "metrics": {"loss": 0.5}})
    session.post(f"/trials/{t2}/searcher/completed_operation", {"length": 10, "metric": 0.5})
    assert session.get(f"/experiments/{exp['id']}")["experiment"]["progress"] == pytest.approx(1.0)


def test_logs_paging(session: Session) -> None:
    import datetime

    exp = create(session, config(max_trials=1))
    tid = session.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    master = session._client.app.state.master  # type: ignore[attr-defined]
    from determined.master.lifecycle.logs import LogWriter

    writer = LogWriter(master._writes)
    for i in range(25):
        writer.add(tid, datetime.datetime(2024, 1, 1), "stdout" if i % 2 else "stderr", f"line {i}")
    writer.flush()
    first = session.get(f"/trials/{tid}/logs", {"offset": 0, "limit": 10})
    assert [l["message"] for l in first["logs"]] == [f"line {i}" for i in range(10)]
    assert first["next_offset"] == 10 and first["trial_state"] == "ACTIVE"
    assert first["logs"][1]["stream"] == "stdout" and first["logs"][0]["timestamp"].startswith("2024-01-01")
    rest = session.get(f"/trials/{tid}/logs", {"offset": 10, "limit": 100})
    assert [l["message"] for l in rest["logs"]] == [f"line {i}" for i in range(10, 25)]
    assert rest["next_offset"] == 25
    assert session.get(f"/trials/{tid}/logs", {"offset": 25})["logs"] == []


@pytest.mark.skipif(os.environ.get("DET_TEST_DB", "sqlite") != "sqlite", reason="checks the SQLite file itself")
def test_database_is_shared_between_apps(tmp_path: pathlib.Path) -> None:
    first = in_process_session(tmp_path / "data")
    create(first, config(max_trials=1))
    second = in_process_session(tmp_path / "data")
    assert len(second.get("/experiments")["experiments"]) == 1
    assert (tmp_path / "data" / "determined.db").exists()


def test_warm_start_from_a_trial_checkpoint(session: Session) -> None:
    source = create(session, config(max_trials=1, length=10))
    tid = session.get(f"/experiments/{source['id']}")["trials"][0]["id"]
    cfg = config(max_trials=1, length=10, searcher={"source_trial_id": tid})
    with pytest.raises(errors.APIError) as info:
        create(session, cfg)
    assert "source_trial_id" in str(info.value) and len(session.get("/experiments")["experiments"]) == 1
    session.post(f"/trials/{tid}/checkpoints", {"uuid": WARM, "steps_completed": 10, "resources": {}})
    warm = create(session, cfg)
    new_trial = session.get(f"/experiments/{warm['id']}")["trials"][0]["id"]
    ctx = session.get(f"/trials/{new_trial}/context")
    assert ctx["latest_checkpoint"] == {"uuid": WARM, "steps_completed": 10} and ctx["steps_completed"] == 0


def test_a_clone_starts_from_its_parents_latest_checkpoint(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """What PBT needs: Create(checkpoint={"request_id": parent}) starts the new trial from the parent's checkpoint."""
    from determined import searcher
    from determined.master.lifecycle import experiment

    exp = create(session, config(max_trials=1, length=10))
    parent = session.get(f"/experiments/{exp['id']}")["trials"][0]
    session.post(f"/trials/{parent['id']}/checkpoints", {"uuid": PARENT_CK, "steps_completed": 10, "resources": {}})
    real = experiment.load_searcher

    def cloning(e, capacity=None):  # type: ignore[no-untyped-def]
        s = real(e, capacity)
        original = s.validation_completed
        s.validation_completed = lambda rid, metric, length: original(rid, metric, length) + [  # type: ignore[method-assign]
            searcher.Create("clone", {"x": 0.25, "global_batch_size": 4}, checkpoint={"request_id": rid}),
            searcher.ValidateAfter("clone", 10)]
        return s

    monkeypatch.setattr(experiment, "load_searcher", cloning)
    session.post(f"/trials/{parent['id']}/searcher/completed_operation", {"length": 10, "metric": 0.5})
    clone = [t for t in session.get(f"/experiments/{exp['id']}")["trials"] if t["request_id"] == "clone"][0]
    assert clone["hparams"]["x"] == 0.25
    assert session.get(f"/trials/{clone['id']}/context")["latest_checkpoint"]["uuid"] == PARENT_CK
    assert session.get(f"/trials/{clone['id']}/searcher/operation") == {"length": 10, "searcher_length": 10}
