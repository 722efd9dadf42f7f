"""Training reports of trials' own runs share transactions (group commit) but keep their own outcomes."""
import concurrent.futures
import math
import pathlib
import threading
import time
import warnings
from typing import Any, Dict, List, Tuple

from sqlalchemy import select

from determined.common.api import Session

from determined.master.lifecycle import allocations, protocol
from determined.master import create_app
from determined.master.db import TrainingMetrics, Trial
from determined.master.problems import RequestProblem

from ._helpers import config, model_def

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def _app_with_running_trials(data_dir: pathlib.Path, trials: int) -> Tuple[Any, List[Tuple[int, str]]]:
    app = create_app(data_dir, run_scheduler=False)
    session = Session("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")
    exp = session.post("/experiments", {"config": config(max_trials=trials), "model_definition": model_def()})
    runs = []
    with app.state.master.write() as s:
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp["experiment"]["id"])):
            runs.append((trial.id, allocations.start_allocation(s, trial)[1]))
    session.close()
    return app, runs


def _stored(app: Any) -> Dict[Tuple[int, int], Any]:
    with app.state.master.read() as s:
        rows = s.scalars(select(TrainingMetrics)).all()
        found: Dict[Tuple[int, int], Any] = {}
        for row in rows:
            assert (row.trial_id, row.steps_completed) not in found, "a step was stored twice"
            found[(row.trial_id, row.steps_completed)] = (row.metrics, row.batch_metrics)
        return found


def test_reports_waiting_together_share_a_commit_and_keep_their_own_outcome(tmp_path: pathlib.Path) -> None:
    app, [(t1, tok1), (t2, tok2)] = _app_with_running_trials(tmp_path / "data", 2)
    master = app.state.master
    writer = master.group_commit(protocol.store_training_reports, "training-metrics")

    def report(trial_id: int, token: str, steps: int, loss: float) -> protocol.TrainingReport:
        return protocol.training_report(trial_id, token, {"steps_completed": steps, "metrics": {"loss": loss},
                                                          "batch_metrics": [{"loss": loss}, {"loss": math.nan}]})

    stores = []
    real_apply = writer.apply
    writer.apply = lambda conn, items: stores.append(len(items)) or real_apply(conn, items)  # type: ignore
    with master.lock:  # the writer waits for the lock: everything submitted meanwhile goes in its next commit
        first = writer.submit(report(t1, tok1, 10, 1.0))
        time.sleep(0.2)
        futures = [writer.submit(r) for r in (
            report(t1, tok1, 20, 2.0), report(t1, tok1, 20, 2.5),  # the same step twice: the later one stays
            report(t2, tok2, 20, 3.0), report(t2, "a-stale-token", 30, 4.0), report(999, tok1, 5, 5.0))]
    first.result(timeout=30)
    outcomes = [f.exception(timeout=30) for f in futures]
    assert stores == [1, 5]
    assert outcomes[:3] == [None, None, None]
    assert isinstance(outcomes[3], RequestProblem) and outcomes[3].status == 409
    assert isinstance(outcomes[4], RequestProblem) and outcomes[4].status == 404
    assert _stored(app) == {(t1, 10): ({"loss": 1.0}, [{"loss": 1.0}, {"loss": None}]),
                            (t1, 20): ({"loss": 2.5}, [{"loss": 2.5}, {"loss": None}]),
                            (t2, 20): ({"loss": 3.0}, [{"loss": 3.0}, {"loss": None}])}
    with master.read() as s:
        assert s.get(Trial, t1).total_batches == 20 and s.get(Trial, t2).total_batches == 20
    master.stop()


def test_concurrent_reports_over_http_are_all_stored_once(tmp_path: pathlib.Path) -> None:
    app, runs = _app_with_running_trials(tmp_path / "data", 4)
    errors: List[str] = []

    def trial_client(trial_id: int, token: str, client: Any) -> None:
        for steps in range(1, 11):
            for _ in range(2 if steps == 5 else 1):  # a step reported again (a restarted run) replaces the first
                body = {"steps_completed": steps, "metrics": {"loss": 1 / steps},
                        "batch_metrics": [{"loss": 1 / steps, "i": i} for i in range(3)]}
                resp = client.post(f"/api/v1/trials/{trial_id}/training_metrics", json=body,
                                   headers={"Authorization": f"Bearer {token}"})
                if resp.status_code != 200:
                    errors.append(f"{resp.status_code} {resp.text}")
        bad = client.post(f"/api/v1/trials/{trial_id}/training_metrics", content=b"[1, 2]",
                          headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        assert bad.status_code == 400 and "JSON object" in bad.json()["detail"]["message"]
        bad = client.post(f"/api/v1/trials/{trial_id}/training_metrics", json={"steps_completed": -1},
                          headers={"Authorization": f"Bearer {token}"})
        assert bad.status_code == 400 and "steps_completed" in bad.json()["detail"]["message"]

    with TestClient(app, base_url="http://in-process") as client:
        with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
            list(pool.map(lambda run: trial_client(run[0], run[1], client), runs))
    assert errors == []
    stored = _stored(app)
    assert sorted(stored) == sorted((t, steps) for t, _ in runs for steps in range(1, 11))
    assert all(len(batches) == 3 for _, batches in stored.values())
    with app.state.master.read() as s:
        assert {s.get(Trial, t).total_batches for t, _ in runs} == {10}


def test_a_stopped_master_stores_what_was_queued(tmp_path: pathlib.Path) -> None:
    app, [(t1, tok1)] = _app_with_running_trials(tmp_path / "data", 1)
    master = app.state.master
    writer = master.group_commit(protocol.store_training_reports, "training-metrics")
    gate = threading.Event()
    with master.lock:
        futures = [writer.submit(protocol.training_report(t1, tok1, {"steps_completed": n, "metrics": {}}))
                   for n in range(1, 21)]
        stopper = threading.Thread(target=lambda: (master.stop(), gate.set()))
        stopper.start()
        assert not gate.wait(0.2)  # stop waits for the queued reports, which wait for the lock
    stopper.join(30)
    assert gate.is_set() and all(f.exception(timeout=0) is None for f in futures) and len(_stored(app)) == 20
