"""What a run's answers carry so that it needs fewer requests, and when a running trial's report wakes the
scheduler (only when it changed what the scheduler may start or should release)."""
import base64
import pathlib
from typing import Any, Dict, Iterator, Tuple

import pytest
from sqlalchemy import select

from determined.common.api import Session as ApiSession
from determined.master.lifecycle import allocations
from determined.master import create_app
from determined.master.db.models import Trial

from ._helpers import config, model_def


@pytest.fixture
def master_api(tmp_path: pathlib.Path) -> Iterator[Tuple[Any, ApiSession]]:
    from starlette.testclient import TestClient

    app = create_app(tmp_path / "data", run_scheduler=False)
    api = ApiSession("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")
    yield app.state.master, api
    app.state.master.stop()


# 4 trials, rungs at 4, 8 and 16 batches: a rung's first trial waits, a better second one is promoted at once
ASHA = config(max_trials=4, length=16, searcher={"name": "adaptive_asha", "max_rungs": 3, "divisor": 2,
                                                 "mode": "aggressive"})


def _start(master: Any, trial_id: int) -> None:
    with master.write() as s:
        allocations.start_allocation(s, s.get(Trial, trial_id))


def _trials(api: ApiSession, exp: Dict[str, Any]) -> "list[int]":
    return [t["id"] for t in api.get(f"/experiments/{exp['id']}")["trials"]]


def test_the_context_carries_what_a_run_starts_with(master_api: Tuple[Any, ApiSession]) -> None:
    master, api = master_api
    exp = api.post("/experiments", {"config": config(max_trials=1, length=20), "model_definition": model_def()})
    (trial,) = _trials(api, exp["experiment"])
    _start(master, trial)
    plain = api.get(f"/trials/{trial}/context")
    assert "model_def" not in plain and "searcher_operation" not in plain and "preempt" not in plain
    full = api.get(f"/trials/{trial}/context", params={"with_model_def": "true", "with_operation": "true"})
    assert full["model_def"] == api.get(f"/experiments/{exp['experiment']['id']}/model_def")
    assert base64.b64decode(full["model_def"]["b64_tgz"]) == base64.b64decode(model_def())
    assert full["searcher_operation"] == api.get(f"/trials/{trial}/searcher/operation") == {
        "length": 20, "searcher_length": 20}
    assert full["preempt"] is False
    assert full["master_data_dir"] == plain["master_data_dir"] == api.get("/master/info")["data_dir"]
    assert {k: v for k, v in full.items() if k not in ("model_def", "searcher_operation", "preempt")} == plain

    api.post(f"/experiments/{exp['experiment']['id']}/pause")  # the running trial is asked to stop
    paused = api.get(f"/trials/{trial}/context", params={"with_operation": "true"})
    assert paused["preempt"] is True
    assert api.get(f"/allocations/{_allocation(master, trial)}/signals/preemption") == {"preempt": True}


def _allocation(master: Any, trial_id: int) -> str:
    with master.read() as s:
        return str(s.get(Trial, trial_id).allocation_id)


def test_a_completion_answers_the_next_operation_request(master_api: Tuple[Any, ApiSession]) -> None:
    master, api = master_api
    exp = api.post("/experiments", {"config": ASHA, "model_definition": model_def()})
    first, second = _trials(api, exp["experiment"])[:2]
    for trial in (first, second):
        _start(master, trial)
    answers = {}
    for trial, loss in ((first, 0.9), (second, 0.1)):
        length = api.get(f"/trials/{trial}/searcher/operation")["length"]
        api.post(f"/trials/{trial}/validation_metrics", {"steps_completed": length, "metrics": {"loss": loss}})
        answers[trial] = api.post(f"/trials/{trial}/searcher/completed_operation", {"length": length, "metric": loss})
        # what the trial would have asked next, asked now: the same answer
        assert answers[trial]["next_operation"] == api.get(f"/trials/{trial}/searcher/operation")
        assert answers[trial]["preempt"] is False
    # the first trial of the rung waits for others; the second, better, is promoted at once
    assert answers[first]["next_operation"] == {"wait": True}
    assert answers[second]["next_operation"] == {"length": 8, "searcher_length": 8}


def test_a_running_trial_s_reports_wake_the_scheduler_only_when_they_change_what_it_starts(
        master_api: Tuple[Any, ApiSession]) -> None:
    master, api = master_api
    exp = api.post("/experiments", {"config": config(max_trials=2, length=5), "model_definition": model_def()})
    first, second = _trials(api, exp["experiment"])
    _start(master, first)
    master._wake.clear()
    api.post(f"/trials/{first}/validation_metrics", {"steps_completed": 5, "metrics": {"loss": 0.5}})
    api.post(f"/trials/{first}/searcher/completed_operation", {"length": 5, "metric": 0.5})
    assert not master._wake.is_set()  # a validation, a completion that closes the trial: nothing to start
    with master.read() as s:
        assert s.get(Trial, first).close_requested

    # a completion that leaves a running trial waiting for the search method: its slot may be wanted
    exp = api.post("/experiments", {"config": ASHA, "model_definition": model_def()})
    first, second = _trials(api, exp["experiment"])[:2]
    for trial in (first, second):
        _start(master, trial)
    master._wake.clear()
    answer = api.post(f"/trials/{first}/searcher/completed_operation", {"length": 4, "metric": 0.9})
    assert answer["next_operation"] == {"wait": True} and master._wake.is_set()
    # a completion that gives the running trial more work (a promotion): it carries on by itself
    master._wake.clear()
    answer = api.post(f"/trials/{second}/searcher/completed_operation", {"length": 4, "metric": 0.1})
    assert answer["next_operation"]["length"] == 8 and not master._wake.is_set()

    # a change an owner makes (a pause) always wakes it
    master._wake.clear()
    api.post(f"/experiments/{exp['experiment']['id']}/pause")
    assert master._wake.is_set()


def test_trials_the_search_method_creates_wake_the_scheduler(master_api: Tuple[Any, ApiSession]) -> None:
    from determined.master.lifecycle.experiment import SCHEDULING_CHANGED
    from determined.master.master import WAKE_IF_NEEDED

    master, api = master_api
    api.post("/experiments", {"config": config(max_trials=1, length=5), "model_definition": model_def()})
    master._wake.clear()
    with master.write(wake=WAKE_IF_NEEDED) as s:
        s.scalars(select(Trial)).all()  # reads only
    assert not master._wake.is_set()
    with master.write(wake=WAKE_IF_NEEDED) as s:
        s.info[SCHEDULING_CHANGED] = True  # what the search method's Create sets
    assert master._wake.is_set()
    # and a new experiment's trials: created by the search method inside the request
    master._wake.clear()
    api.post("/experiments", {"config": config(max_trials=1, length=5), "model_definition": model_def()})
    assert master._wake.is_set()
