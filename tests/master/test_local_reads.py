"""The CLI's reads of a data dir no master runs on (determined/master/views/local_reads.py) answer exactly what the
master's app answers, from the SQLite file alone; what they cannot answer goes to the app."""
import os
import pathlib
import sqlite3
import uuid
from typing import Any, Dict, List

import pytest

from determined import errors
from determined.experimental import _connect
from determined.master import embedded
from determined.master.views import local_reads

from ._helpers import config, model_def

ON_POSTGRES = os.environ.get("DET_TEST_DB") == "postgres"


def fill(data_dir: pathlib.Path) -> Dict[str, Any]:
    session = embedded.in_process_session(data_dir)
    cfg = config(max_trials=3, length=20)
    cfg["searcher"] = {"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 20}, "max_trials": 3,
                       "divisor": 2, "mode": "aggressive", "max_rungs": 2}
    exp = session.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"]
    uuids: List[str] = []
    for i, trial in enumerate(session.get(f"/experiments/{exp}")["trials"]):
        tid = trial["id"]
        length = session.get(f"/trials/{tid}/searcher/operation")["length"]
        session.post(f"/trials/{tid}/training_metrics", {"steps_completed": length, "metrics": {"loss": 1.0 + i}})
        session.post(f"/trials/{tid}/validation_metrics", {"steps_completed": length, "metrics": {"loss": 0.5 + i}})
        session.post(f"/trials/{tid}/metrics", {"group": "inference", "steps_completed": length,
                                                "metrics": {"latency": 0.1 * i}})
        uuids.append(str(uuid.uuid4()))
        session.post(f"/trials/{tid}/checkpoints", {"uuid": uuids[-1], "steps_completed": length,
                                                   "resources": {"w": 10}, "metadata": {"k": i}})
        session.post(f"/trials/{tid}/searcher/completed_operation", {"length": length, "metric": 0.5 + i})
    session.post("/models/m", {"description": "d", "metadata": {}})
    session.post("/models/m/versions", {"checkpoint_uuid": uuids[0]})
    session.post("/models/another_model%", {"description": "has 100% of _it_", "metadata": {}})
    return {"session": session, "experiment": exp, "uuids": uuids}


@pytest.mark.skipif(ON_POSTGRES, reason="the direct reads are for a data dir's SQLite file; PostgreSQL goes to the app")
def test_local_reads_answer_what_the_app_answers(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    filled = fill(data_dir)
    app, exp, uuids = filled["session"], filled["experiment"], filled["uuids"]
    local = local_reads.open_local(data_dir)
    assert local is not None
    trial = app.get(f"/experiments/{exp}")["trials"][0]["id"]
    paths = [("/experiments", None), (f"/experiments/{exp}", None), (f"/experiments/{exp}/checkpoints", None),
             (f"/experiments/{exp}/checkpoints", {"states": ["COMPLETED"]}), (f"/trials/{trial}", None),
             (f"/trials/{trial}/logs", {"offset": 0, "limit": 5}), (f"/trials/{trial}/checkpoints", None),
             *[(f"/trials/{trial}/metrics", {"group": g}) for g in ("training", "validation", "inference", "none")],
             (f"/checkpoints/{uuids[0]}", None), ("/models", None), ("/models", {"name": "%", "order_by": "desc"}),
             ("/models", {"description": "_it_", "sort_by": "creation_time"}), ("/models/m", None)]
    for path, params in paths:
        assert local.get(path, params) == app.get(path, params), path
    assert [m["name"] for m in local.get("/models", {"name": "%"})["models"]] == ["another_model%"]
    for path in (f"/experiments/{exp + 10}", "/trials/999", "/checkpoints/nope", "/models/nope"):
        with pytest.raises(errors.NotFoundError):
            local.get(path)
    with pytest.raises(errors.APIError) as bad:
        local.get("/experiments/1/checkpoints", {"states": ["GONE"]})
    assert bad.value.status_code == 400 and "not a checkpoint state" in str(bad.value)
    assert local.get(f"/trials/{trial}")["metric_groups"] == ["training", "validation", "inference"]
    with pytest.raises(errors.APIError, match="without '.'"):
        local.get(f"/trials/{trial}/metrics", {"group": "a.b"})
    assert local.get("/master/info")["scheduler"] is False
    # what it does not read locally goes to the app: other routes, and every write
    assert local.get(f"/experiments/{exp}/searcher_progress")["name"] == "adaptive_asha"
    local.post("/models/written-through-the-app", {"description": "", "metadata": {}})
    assert local.get("/models/written-through-the-app")["model"]["name"] == "written-through-the-app"


@pytest.mark.skipif(ON_POSTGRES, reason="the direct reads are for a data dir's SQLite file; PostgreSQL goes to the app")
def test_the_app_answers_when_the_file_cannot(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    assert local_reads.open_local(data_dir) is None  # no database yet: the app creates it
    monkeypatch.setenv("DET_DATA_DIR", str(data_dir))
    assert _connect.read_session().master == "http://in-process"
    assert local_reads.open_local(data_dir) is not None
    assert _connect.read_session().master == f"local:{data_dir.resolve()}"
    with sqlite3.connect(data_dir / "determined.db") as db:  # a database of an older release: the app migrates it
        db.execute("UPDATE alembic_version SET version_num = '0003'")
    assert local_reads.open_local(data_dir) is None
    monkeypatch.setenv("DET_DB_URL", "postgresql://user:pw@127.0.0.1:1/db")
    assert local_reads.open_local(data_dir) is None


def test_the_head_revision_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(local_reads.MIGRATIONS.parent))
    assert local_reads.head_revision() == scripts.get_current_head()


@pytest.mark.skipif(ON_POSTGRES, reason="the direct reads are for a data dir's SQLite file; PostgreSQL goes to the app")
def test_one_table_serves_both_so_both_refuse_the_same_parameters(tmp_path: pathlib.Path) -> None:
    """The local reads and the app's GET routes come from one table (views/read_table.py): every entry is a route
    of the app, and a parameter out of its bounds or missing is refused by both, with the same problems."""
    from determined.master import create_app
    from determined.master.api import contract
    from determined.master.views import read_table

    paths = contract.openapi(create_app(tmp_path / "app", run_scheduler=False))["paths"]
    assert all("get" in paths.get("/api/v1" + route.path, {}) for route in read_table.READS)
    data_dir = tmp_path / "data"
    filled = fill(data_dir)
    app = filled["session"]
    local = local_reads.open_local(data_dir)
    assert local is not None
    trial = app.get(f"/experiments/{filled['experiment']}")["trials"][0]["id"]
    for path, params in [(f"/trials/{trial}/logs", {"limit": 20000}), (f"/trials/{trial}/logs", {"offset": -1}),
                         (f"/trials/{trial}/logs", {"limit": "many"}), (f"/trials/{trial}/metrics", None),
                         (f"/trials/{trial}/metrics", {"group": "g" * 200})]:
        refusals = []
        for session in (local, app):
            with pytest.raises(errors.APIError) as refused:
                session.get(path, params)
            refusals.append((refused.value.status_code, sorted(p.split(":")[0] for p in refused.value.problems)))
        assert refusals[0] == refusals[1] and refusals[0][0] == 400, (path, params, refusals)
