"""The model registry routes in-process, and the migration that adds the registry to a 0001 database."""
import datetime
import pathlib
from typing import Any, Dict, List

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, insert, select, text

from determined import errors
from determined.common.api import Session
from determined.master import Master, in_process_session
from determined.master.registry import model_registry
from determined.master.storage import gc as checkpoint_gc
from determined.master.db import Base, Checkpoint, Experiment, default_db_url, make_engine, upgrade
from determined.master.db.engine import alembic_config
from determined.master.problems import RequestProblem

from .test_checkpoint_routes import make_experiment, refused, report


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "data"


@pytest.fixture
def session(data_dir: pathlib.Path) -> Session:
    return in_process_session(data_dir)


def names(models: List[Dict[str, Any]]) -> List[str]:
    return [m["name"] for m in models]


def test_create_get_update_and_refusals(session: Session) -> None:
    model = session.post("/models/mnist", {"description": "digits", "metadata": {"team": "a"}})["model"]
    assert model["name"] == "mnist" and model["description"] == "digits" and model["metadata"] == {"team": "a"}
    assert model["num_versions"] == 0 and model["creation_time"] == model["last_updated_time"]
    assert session.post("/models/bare")["model"]["metadata"] == {}
    assert session.get("/models/mnist")["model"] == model

    problem = refused(409, session.post, "/models/mnist", {})
    assert "mnist" in str(problem) and "already exists" in str(problem)
    for body, needle in (({"metadata": [1]}, "metadata"), ({"metadata": "x"}, "metadata"), ({"metadata": 3}, "metadata"),
                         ({"description": 5}, "description"), ({"labels": []}, "labels")):
        assert needle in str(refused(400, session.post, "/models/other", body))
    assert "JSON object" in str(refused(400, session.post, "/models/other", {"metadata": [1]}))
    assert "256" in str(refused(400, session.post, "/models/" + "n" * 257, {}))
    assert session.post("/models/" + "n" * 256)["model"]["name"] == "n" * 256
    with pytest.raises(errors.APIError):  # a '/' cannot reach a model route
        session.post("/models/a%2Fb", {})
    with pytest.raises(RequestProblem, match="'/'"):
        model_registry.check_name("a/b")
    assert sorted(names(session.get("/models")["models"])) == ["bare", "mnist", "n" * 256], "nothing else stored"

    updated = session.patch("/models/mnist", {"metadata": {"owner": "b"}})["model"]
    assert updated["metadata"] == {"owner": "b"}, "metadata replaces the whole object"
    assert updated["description"] == "digits" and updated["last_updated_time"] >= model["last_updated_time"]
    assert session.patch("/models/mnist", {"description": "new"})["model"]["description"] == "new"
    for body in ({"metadata": ["x"]}, {"metadata": None}, {"description": None}, {"name": "renamed"}):
        refused(400, session.patch, "/models/mnist", body)
    assert session.get("/models/mnist")["model"]["metadata"] == {"owner": "b"}
    assert "nope" in str(refused(404, session.patch, "/models/nope", {"description": "x"}))
    assert "nope" in str(refused(404, session.get, "/models/nope"))


def test_list_sort_and_filter(session: Session) -> None:
    for name, description in (("beta", "Second MODEL"), ("alpha", "first"), ("gamma", "a model too")):
        session.post(f"/models/{name}", {"description": description})
    assert names(session.get("/models")["models"]) == ["alpha", "beta", "gamma"]
    assert names(session.get("/models", {"order_by": "desc"})["models"]) == ["gamma", "beta", "alpha"]
    assert names(session.get("/models", {"sort_by": "creation_time"})["models"]) == ["beta", "alpha", "gamma"]
    assert names(session.get("/models", {"sort_by": "description"})["models"]) == ["gamma", "alpha", "beta"]
    session.patch("/models/alpha", {"description": "first again"})
    latest = session.get("/models", {"sort_by": "last_updated_time", "order_by": "desc"})["models"]
    assert names(latest)[0] == "alpha"
    assert names(session.get("/models", {"description": "model"})["models"]) == ["beta", "gamma"]
    assert names(session.get("/models", {"name": "AL"})["models"]) == ["alpha"]
    assert names(session.get("/models", {"name": "%"})["models"]) == [], "no SQL wildcards"
    assert "sort_by" in str(refused(400, session.get, "/models", {"sort_by": "size"}))
    assert "order_by" in str(refused(400, session.get, "/models", {"order_by": "up"}))


def test_versions(session: Session, data_dir: pathlib.Path) -> None:
    desc = make_experiment(session, trials=1)
    trial_id = desc["trials"][0]["id"]
    first = report(session, data_dir, trial_id, 10, loss=0.5)
    second = report(session, data_dir, trial_id, 20, loss=0.4)
    session.post("/models/m", {})
    session.post("/models/other", {})
    created = session.get("/models/m")["model"]

    v1 = session.post("/models/m/versions", {"checkpoint_uuid": first})["version"]
    assert v1["version"] == 1 and v1["model_name"] == "m" and v1["checkpoint"]["uuid"] == first
    assert v1["checkpoint"]["model_versions"] == [{"model_name": "m", "version": 1}]
    v2 = session.post("/models/m/versions", {"checkpoint_uuid": second})["version"]
    assert v2["version"] == 2
    session.post("/models/other/versions", {"checkpoint_uuid": first})
    assert session.get(f"/checkpoints/{first}")["checkpoint"]["model_versions"] == [
        {"model_name": "m", "version": 1}, {"model_name": "other", "version": 1}]

    listed = session.get("/models/m/versions")
    assert listed["model"]["num_versions"] == 2 and listed["model"]["last_updated_time"] >= created["last_updated_time"]
    assert [v["version"] for v in listed["versions"]] == [2, 1], "newest first by default"
    assert [v["version"] for v in session.get("/models/m/versions", {"order_by": "asc"})["versions"]] == [1, 2]
    assert session.get("/models/m/versions/1")["version"]["checkpoint"]["uuid"] == first
    assert "versions are 1 to 2" in str(refused(404, session.get, "/models/m/versions/3"))
    refused(404, session.get, "/models/nope/versions")

    assert "nope" in str(refused(404, session.post, "/models/m/versions", {"checkpoint_uuid": "nope"}))
    refused(404, session.post, "/models/nope/versions", {"checkpoint_uuid": first})
    refused(400, session.post, "/models/m/versions", {})
    refused(400, session.post, "/models/m/versions", {"checkpoint_uuid": 7})

    # A checkpoint deleted by GC cannot be registered.
    doomed = report(session, data_dir, trial_id, 15, loss=0.9)
    session.post(f"/experiments/{desc['experiment']['id']}/cancel")  # collected at once in-process
    assert session.get(f"/checkpoints/{doomed}")["checkpoint"]["state"] == "DELETED"
    assert session.get(f"/checkpoints/{first}")["checkpoint"]["state"] == "COMPLETED", "registered: kept"
    problem = refused(400, session.post, "/models/m/versions", {"checkpoint_uuid": doomed})
    assert "DELETED" in str(problem) and "COMPLETED" in str(problem)
    assert session.get("/models/m")["model"]["num_versions"] == 2, "nothing stored by refused registrations"


OLD_UUIDS = {10: "1d0b6a5e-7c38-4f29-9e1a-0b2c3d4e5f60", 20: "2e1c7b6f-8d49-4a3a-8f2b-1c3d4e5f6071",
             30: "3f2d8c7a-9e5a-4b4b-9a3c-2d4e5f607182"}


def test_a_0001_database_upgrades_and_its_ended_experiments_are_collected(data_dir: pathlib.Path) -> None:
    data_dir.mkdir()
    engine = make_engine(default_db_url(data_dir))
    upgrade(engine, "0001")
    storage = data_dir / "checkpoints"
    config = {"searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
              "checkpoint_storage": {"type": "shared_fs", "host_path": str(data_dir), "storage_path": "checkpoints",
                                     "save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}}
    now = datetime.datetime(2024, 1, 1)
    old = MetaData()
    old.reflect(engine)  # the tables as the 0001 schema made them (no checkpoint_gc_done column)
    with engine.begin() as conn:
        conn.execute(insert(old.tables["experiments"]).values(
            id=1, state="COMPLETED", config=config, model_def=b"", owner="determined", searcher_shutdown=True,
            searcher_failure=False, progress=1.0, start_time=now))
        conn.execute(insert(old.tables["trials"]).values(
            id=1, experiment_id=1, request_id="r", hparams={}, seed=1, state="COMPLETED", restarts=0, total_batches=30,
            runs=1, preempt_requested=False, close_requested=True, start_time=now))
        for steps in (10, 20, 30):
            (storage / OLD_UUIDS[steps]).mkdir(parents=True)
            conn.execute(insert(old.tables["checkpoints"]).values(
                uuid=OLD_UUIDS[steps], experiment_id=1, trial_id=1, state="COMPLETED", steps_completed=steps, resources={},
                framework="", format="", metadata={}, determined_version="0.1", start_time=now, end_time=now))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0001"

    upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == _head_revision()
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("SELECT checkpoint_gc_done FROM experiments")).scalar() is None
    engine.dispose()

    master = Master(data_dir, run_scheduler=False)
    with master.read() as s:
        assert [c.uuid for c in s.scalars(select(Checkpoint).order_by(Checkpoint.id))] == [OLD_UUIDS[n] for n in (10, 20, 30)]
    assert checkpoint_gc.run_pending_gc(master) == [1], "an ended experiment of the old database is due"
    assert checkpoint_gc.run_pending_gc(master) == [], "and collected once"
    with master.read() as s:
        got = {c.uuid: c.state for c in s.scalars(select(Checkpoint))}
        assert s.get(Experiment, 1).checkpoint_gc_done is True
    # No validations: every checkpoint ranks alike, the latest wins both "best" and "latest".
    assert got == {OLD_UUIDS[10]: "DELETED", OLD_UUIDS[20]: "DELETED", OLD_UUIDS[30]: "COMPLETED"}
    assert sorted(p.name for p in storage.iterdir()) == [OLD_UUIDS[30]]
    master.stop()


def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(alembic_config()).get_current_head())
