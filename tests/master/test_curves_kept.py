"""Learning curves kept across master restarts (db.TrialCurve): the experiment's metrics route answers what
downsampling each trial's full series gives, a new report makes the trial's curve be read again, and a restarted
master answers from the kept curves without reading the points. Runs on PostgreSQL too (DET_TEST_DB=postgres)."""
import math
import pathlib
import warnings
from typing import Any, Dict, List, Tuple

import pytest
from sqlalchemy import select

from determined.common.api import Session
from determined.master.lifecycle import allocations, experiment
from determined.master import create_app
from determined.master.insights import curves
from determined.master.db import Trial, TrialCurve

from ._helpers import config, model_def

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

POINTS = 4  # per metric: the first, the last, one bucket's minimum and maximum


def _start(data_dir: pathlib.Path) -> Tuple[Any, Session]:
    app = create_app(data_dir, run_scheduler=False)
    return app, Session("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")


def _experiment(data_dir: pathlib.Path) -> Tuple[Any, Session, int, List[Tuple[int, str]]]:
    app, api = _start(data_dir)
    exp = api.post("/experiments", {"config": config(max_trials=2), "model_definition": model_def()})
    runs = []
    with app.state.master.write() as s:
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp["experiment"]["id"])):
            runs.append((trial.id, allocations.start_allocation(s, trial)[1]))
    return app, api, exp["experiment"]["id"], runs


def _report(api: Session, trial_id: int, token: str, steps: int, loss: float, group: str = "training") -> None:
    body: Dict[str, Any] = {"steps_completed": steps, "metrics": {"loss": loss, "acc": math.cos(steps)}}
    resp = api._client.post(f"/api/v1/trials/{trial_id}/{group}_metrics", json=body,
                            headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text


def _curves(api: Session, exp_id: int) -> Dict[int, Dict[str, List[Any]]]:
    answer = api.get(f"/experiments/{exp_id}/metrics", {"max_points": POINTS})
    assert answer["max_points"] == POINTS
    return {t["trial_id"]: {"training": t["training"], "validation": t["validation"]} for t in answer["trials"]}


def _from_full_series(api: Session, trial_id: int, group: str) -> List[Any]:
    full = api.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
    kept = [full[i] for i in curves.downsample([p["metrics"] for p in full], POINTS)]
    return [{"steps_completed": p["steps_completed"], "end_time": p["end_time"],
             "metrics": {k: v for k, v in p["metrics"].items() if curves.numeric(v)}} for p in kept]


def _assert_downsampled(api: Session, exp_id: int, answer: Dict[int, Dict[str, List[Any]]]) -> None:
    for trial_id, groups in answer.items():
        for group, points in groups.items():
            assert points == _from_full_series(api, trial_id, group)
            full = api.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
            if not full:
                continue
            assert points[0]["steps_completed"] == full[0]["steps_completed"]
            assert points[-1]["steps_completed"] == full[-1]["steps_completed"]
            losses = [p["metrics"]["loss"] for p in full]
            assert {min(losses), max(losses)} <= {p["metrics"]["loss"] for p in points}  # the extremes stay


def _kept(app: Any) -> Dict[Tuple[int, str], int]:
    with app.state.master.read() as s:
        return {(c.trial_id, c.group_name): c.version for c in s.scalars(
            select(TrialCurve).where(TrialCurve.max_points == POINTS))}


def _versions(app: Any) -> Dict[int, int]:
    with app.state.master.read() as s:
        return {t.id: t.metrics_version or 0 for t in s.scalars(select(Trial))}


def test_kept_curves_follow_reports_and_survive_a_restart(tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    app, api, exp_id, [(t1, tok1), (t2, tok2)] = _experiment(data)
    for steps in range(1, 41):
        _report(api, t1, tok1, steps, 1.0 / steps if steps != 17 else 50.0)  # a spike must stay in the curve
        _report(api, t2, tok2, steps, 2.0 / steps)
    _report(api, t1, tok1, 10, 1.0)
    _report(api, t1, tok1, 20, 0.5, "validation")
    first = _curves(api, exp_id)
    _assert_downsampled(api, exp_id, first)
    assert any(p["metrics"]["loss"] == 50.0 for p in first[t1]["training"])
    versions = _versions(app)
    assert _kept(app) == {(t, g): versions[t] for t in (t1, t2) for g in ("training", "validation")}

    _report(api, t2, tok2, 41, -3.0)  # a new report: trial 2's curve is read again, trial 1's is not
    assert _versions(app)[t2] > versions[t2] and _versions(app)[t1] == versions[t1]
    second = _curves(api, exp_id)
    assert second[t1] == first[t1] and second[t2]["training"][-1]["metrics"]["loss"] == -3.0
    _assert_downsampled(api, exp_id, second)
    assert _kept(app)[(t2, "training")] == _versions(app)[t2]
    app.state.master.stop()

    # A restarted master answers from the kept curves: no trial's points are downsampled again.
    app, api = _start(data)
    with monkeypatch.context() as patch:
        patch.setattr(curves, "downsample", lambda *a: pytest.fail("a kept curve was read from the points"))
        assert _curves(api, exp_id) == second
    _report(api, t1, tok1, 41, 7.0)  # the run's token survives the restart: a report after it is read again
    third = _curves(api, exp_id)
    assert third[t1]["training"][-1]["metrics"]["loss"] == 7.0 and third[t2] == second[t2]
    _assert_downsampled(api, exp_id, third)
    app.state.master.stop()


def test_a_rollback_to_the_checkpoint_makes_the_curve_be_read_again(tmp_path: pathlib.Path) -> None:
    app, api, exp_id, [(t1, tok1), _] = _experiment(tmp_path / "data")
    for steps in range(1, 21):
        _report(api, t1, tok1, steps, 1.0 / steps)
    assert _curves(api, exp_id)[t1]["training"][-1]["steps_completed"] == 20
    with app.state.master.write() as s:  # what a restarted run does: metrics past the last checkpoint go
        trial = s.get(Trial, t1)
        experiment.rollback_to_checkpoint(s, experiment.get_experiment(s, exp_id), trial)
    after = _curves(api, exp_id)
    assert after[t1]["training"] == []
    app.state.master.stop()


def test_deleting_the_experiment_deletes_its_kept_curves(tmp_path: pathlib.Path) -> None:
    from determined.master.lifecycle import states
    from determined.master.db import Experiment

    app, api, exp_id, [(t1, tok1), _] = _experiment(tmp_path / "data")
    _report(api, t1, tok1, 1, 0.5)
    _curves(api, exp_id)
    assert _kept(app)
    with app.state.master.write() as s:  # an ended experiment (no scheduler runs in this test)
        s.get(Experiment, exp_id).state = states.CANCELED
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp_id)):
            trial.state, trial.allocation_id = states.CANCELED, None
    resp = api._client.delete(f"/api/v1/experiments/{exp_id}")
    assert resp.status_code in (200, 204), resp.text
    assert _kept(app) == {}
    app.state.master.stop()
