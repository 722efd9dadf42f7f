"""The import's metric route on its own, through an admin's session to an in-process master: metric cells arrive as
JSON text (stored as they came), a row whose text the database cannot store is skipped with the reason on SQLite
and on PostgreSQL alike, and the learning curves of the trials an import writes are read again from their points."""
import pathlib
from typing import Any, Dict, Iterator, List, Optional

import pytest

from determined import errors
from determined.experimental.determined_import._runner import METRIC_COLUMNS
from tests import _postgres
from tests.auth._helpers import InProcessMaster

T = "2024-01-01T00:00:00Z"


@pytest.fixture(params=["sqlite", "postgresql"])
def master(request: pytest.FixtureRequest, tmp_path: pathlib.Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessMaster]:
    if request.param == "postgresql":
        if not _postgres.available():
            pytest.skip("PostgreSQL is not installed")
        monkeypatch.setenv("DET_DB_URL", _postgres.fresh_database_url())
    elif _postgres.wanted():
        pytest.skip("every master of this run is on PostgreSQL (DET_TEST_DB=postgres)")
    else:
        monkeypatch.delenv("DET_DB_URL", raising=False)
    m = InProcessMaster(tmp_path / "m")
    assert m.master.engine.dialect.name == request.param
    yield m


def _trial(admin: Any, source: str, experiment: int = 1, trial: int = 7) -> None:
    """A source user, one of its experiments and one trial of it, imported."""
    batch = {"source": source}
    admin.post("/imports/determined/users", {**batch, "rows": [{"id": 1, "username": f"owner-{source}"}]})
    config = {"searcher": {"name": "single", "metric": "loss", "smaller_is_better": True}}
    admin.post("/imports/determined/experiments", {**batch, "rows": [
        {"id": experiment, "state": "COMPLETED", "config": config, "owner_id": 1}]})
    answer = admin.post("/imports/determined/trials", {**batch, "rows": [
        {"id": trial, "experiment_id": experiment, "state": "COMPLETED"}]})
    assert answer["imported"] == 1


def _metrics(admin: Any, source: str, rows: List[List[Any]], partition: str = "TRAINING") -> Dict[str, Any]:
    return admin.post("/imports/determined/metrics", {  # type: ignore[no-any-return]
        "source": source, "table": "raw_steps" if partition == "TRAINING" else "raw_validations",
        "partition": partition, "columns": list(METRIC_COLUMNS), "rows": rows})


def _row(old_id: int, steps: int, metrics: str, batch: Optional[str] = None, trial: int = 7) -> List[Any]:
    return [old_id, trial, None, steps, T, metrics, batch, False]


def test_rows_the_database_cannot_store_are_skipped_with_the_reason(master: InProcessMaster) -> None:
    admin = master.session("admin")
    _trial(admin, "a")
    answer = _metrics(admin, "a", [
        _row(1, 10, '{"loss": 1.0}', '[{"loss": 1.5}]'),
        _row(2, 20, '{"loss": NaN}'),  # not JSON (PostgreSQL's json refuses it too)
        _row(3, 30, '{"loss": '),
        _row(4, 40, '{"loss": 4.0}', '[1] [2]'),
        _row(5, 50, '{"loss": 5.0, "nested": {"a": [1, 2]}}'),
    ])
    assert answer["imported"] == 2
    reasons = {s["old_id"]: s["reason"] for s in answer["skipped"]}
    assert set(reasons) == {"raw_steps:2", "raw_steps:3", "raw_steps:4"}
    assert "metrics are not valid JSON" in reasons["raw_steps:2"] and "batch_metrics" in reasons["raw_steps:4"]
    stored = admin.get("/trials/7/metrics", params={"group": "training"})
    points = stored["metrics"] if isinstance(stored, dict) and "metrics" in stored else stored
    text = str(points)
    assert "1.5" in text and "5.0" in text and "4.0" not in text
    # a re-run of the batch adds nothing (the watermark passed it), and the trial counts its batches
    again = _metrics(admin, "a", [_row(5, 50, '{"loss": 5.0}')])
    assert again["imported"] == 0 and again["already"] == 1
    assert admin.get("/trials/7")["trial"]["total_batches"] == 50
    # the experiment's config had no seed (one this master reads from every experiment): it gets the source's id
    assert admin.get("/experiments/1/searcher_progress") is not None
    # a cell that is no JSON object's text is refused by the route's model, naming the cell
    with pytest.raises(errors.APIError) as e:
        _metrics(admin, "a", [_row(6, 60, "[1, 2]")])
    assert e.value.status_code == 400 and "rows.0.5" in str(e.value)


def test_learning_curves_are_read_again_after_an_import(tmp_path: pathlib.Path) -> None:
    """A trial id that a deleted experiment's trial had (ids are kept where free) at the same metrics version: the
    curve kept in memory for the old trial is not served for the imported one."""
    m = InProcessMaster(tmp_path / "m")
    admin = m.session("admin")

    def losses() -> List[float]:
        trials = admin.get("/experiments/1/metrics")["trials"]
        return [p["metrics"]["loss"] for t in trials if t["trial_id"] == 7 for p in t["training"]]

    _trial(admin, "cluster-a")
    _metrics(admin, "cluster-a", [_row(1, 10, '{"loss": 1.0}')])
    assert losses() == [1.0]  # read, so kept in memory and in the database
    admin.delete("/experiments/1")
    _trial(admin, "cluster-b")  # another cluster's experiment 1 and trial 7: the same ids, free again
    _metrics(admin, "cluster-b", [_row(1, 10, '{"loss": 2.0}')])
    assert losses() == [2.0]
    # a resumed import into a trial whose curve was read: the kept curve is dropped with the new points
    from sqlalchemy import func, select

    from determined.master.db import TrialCurve

    with m.master.read() as s:  # kept for training and validation
        assert s.scalar(select(func.count()).select_from(TrialCurve).where(TrialCurve.trial_id == 7)) > 0
    _metrics(admin, "cluster-b", [_row(2, 5, '{"loss": 3.0}'), _row(3, 20, '{"loss": 4.0}')])
    with m.master.read() as s:
        assert s.scalar(select(func.count()).select_from(TrialCurve).where(TrialCurve.trial_id == 7)) == 0
    assert losses() == [3.0, 2.0, 4.0]
