"""What the API says a trial does is true (issue 34): the cluster's slots name a running trial RUNNING and a trial
that keeps its slot while it waits WAITING; a waiting trial has no end_time, and when it stopped training is named
`stopped_training_time`; an imported trial that never ran here says it was imported, not that "its process ended".
Runs on PostgreSQL too (DET_TEST_DB=postgres)."""
import pathlib
import warnings
from typing import Any, Dict, Tuple

from sqlalchemy import select

from determined.common.api import Session
from determined.master import create_app
from determined.master.db import Experiment, Trial
from determined.master.db.models import ImportMapping
from determined.master.lifecycle import allocations, states

from ._helpers import config, model_def

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def _start(data_dir: pathlib.Path) -> Tuple[Any, Session]:
    app = create_app(data_dir, run_scheduler=False)
    return app, Session("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")


def _trials(api: Session, exp_id: int) -> Dict[int, Dict[str, Any]]:
    return {t["id"]: t for t in api.get(f"/experiments/{exp_id}")["trials"]}


def test_slots_and_times_say_what_a_trial_does(tmp_path: pathlib.Path) -> None:
    app, api = _start(tmp_path / "data")
    cfg = config(searcher={"name": "adaptive_asha", "max_trials": 2, "max_length": {"batches": 8}, "divisor": 2,
                           "max_rungs": 2, "mode": "aggressive"})
    exp_id = api.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"]
    with app.state.master.write() as s:
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp_id)):
            allocations.start_allocation(s, trial)
    a, b = sorted(_trials(api, exp_id))
    length = api.get(f"/trials/{b}/searcher/operation")["length"]
    api.post(f"/trials/{b}/searcher/completed_operation", {"length": length, "metric": 0.5})

    slots = {x["trial_id"]: x for x in api.get("/cluster/slots")["allocations"]}
    assert slots[a]["trial_state"] == slots[b]["trial_state"] == "ACTIVE", "the stored state is Determined's"
    assert slots[a]["trial_status"] == "RUNNING" and slots[a]["trial_status_reason"].startswith("training to ")
    assert slots[b]["trial_status"] == "WAITING"
    assert slots[b]["trial_status_reason"].startswith("waiting for promotion")

    for seen in (_trials(api, exp_id), {t: api.get(f"/trials/{t}")["trial"] for t in (a, b)}):
        assert seen[a]["status"] == "RUNNING" and seen[a]["end_time"] is None
        assert seen[a]["stopped_training_time"] is None, "it trains"
        assert seen[b]["status"] == "WAITING" and seen[b]["end_time"] is None, "it has not ended"
        assert seen[b]["stopped_training_time"] is not None, "it stopped training when its rung completed"
        assert seen[b]["stopped_training_time"] >= seen[b]["start_time"]
    waited_since = _trials(api, exp_id)[b]["stopped_training_time"]

    api.post(f"/experiments/{exp_id}/kill")
    stopping = _trials(api, exp_id)
    assert all(t["status"] == "STOPPING" and t["end_time"] is None for t in stopping.values()), stopping
    assert (stopping[a]["stopped_training_time"], stopping[b]["stopped_training_time"]) == (None, waited_since)
    with app.state.master.write() as s:  # their processes exit
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp_id)):
            allocations.process_exited(s, trial.id, str(trial.allocation_id), -9)
    ended = _trials(api, exp_id)
    assert all(t["end_time"] is not None and t["stopped_training_time"] is None for t in ended.values()), ended
    assert ended[b]["end_time"] >= waited_since


def test_an_imported_trial_says_it_was_imported(tmp_path: pathlib.Path) -> None:
    app, api = _start(tmp_path / "data")
    exp_id = api.post("/experiments", {"config": config(max_trials=1), "model_definition": model_def()}
                      )["experiment"]["id"]
    with app.state.master.write() as s:
        # What `det import determined` stores (master/imports/determined.py): an ended search, no search state,
        # trials with no operations here, and the mapping of the source's rows.
        source = s.get(Experiment, exp_id)
        exp = Experiment(state=states.COMPLETED, config=source.config, model_def=source.model_def, owner="determined",
                         searcher_snapshot=None, searcher_shutdown=True, searcher_failure=False, progress=1.0,
                         checkpoint_gc_done=True, project_id=1, unmanaged=False)
        s.add(exp)
        s.flush()
        done = Trial(experiment_id=exp.id, request_id="r1", hparams={}, seed=1, state=states.COMPLETED,
                     total_batches=1500, runs=1, metrics_version=0)
        canceled = Trial(experiment_id=exp.id, request_id="r2", hparams={}, seed=2, state=states.CANCELED,
                         total_batches=0, runs=1, metrics_version=0,
                         runner_status="it was ACTIVE there; imported as CANCELED")
        s.add_all([done, canceled])
        s.add(ImportMapping(source="c0ffee", kind="experiments", old_id="7", new_id=str(exp.id)))
        s.flush()
        imported, ids = exp.id, (done.id, canceled.id)
    trials = _trials(api, imported)
    assert (trials[ids[0]]["status"], trials[ids[0]]["status_reason"]) == (
        "COMPLETED", "imported from Determined (cluster c0ffee), where it COMPLETED; its last report there was at "
                     "batch 1500")
    assert (trials[ids[1]]["status"], trials[ids[1]]["status_reason"]) == (
        "CANCELED", "imported from Determined (cluster c0ffee): it was ACTIVE there; imported as CANCELED")
    # A trial of this master's own ended search still says how it ended here.
    api.post(f"/experiments/{exp_id}/kill")
    (own,) = _trials(api, exp_id).values()
    assert own["status"] == "CANCELED" and "imported" not in (own["status_reason"] or "")
