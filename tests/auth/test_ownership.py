"""Only the owner or an admin changes an experiment; a trial's token reports only for its own trial."""
from typing import Any, Dict

import pytest

from determined import errors
from determined.master.lifecycle import allocations
from determined.master.db import Trial

from ._helpers import InProcessMaster, add_user, create_experiment


def _refused(status: int, call, *args: Any, **kwargs: Any) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(errors.APIError) as info:
        call(*args, **kwargs)
    assert info.value.status_code == status, str(info.value)
    return str(info.value)


@pytest.fixture
def users(master: InProcessMaster) -> Dict[str, Any]:
    admin = master.session("admin")
    add_user(admin, "owner", "o-pw")
    add_user(admin, "other", "x-pw")
    return {"admin": admin, "owner": master.session("owner", "o-pw"), "other": master.session("other", "x-pw")}


def test_owner_other_and_admin_on_experiment_actions(master: InProcessMaster, users: Dict[str, Any]) -> None:
    owner, other, admin = users["owner"], users["other"], users["admin"]
    exp = create_experiment(owner)
    eid = exp["id"]
    assert exp["owner"] == "owner" and other.get(f"/experiments/{eid}")["experiment"]["owner"] == "owner"
    for action in ("pause", "activate", "cancel", "kill"):
        message = _refused(403, other.post, f"/experiments/{eid}/{action}")
        assert "owned by 'owner'" in message and "'other'" in message
    _refused(403, other.patch, f"/experiments/{eid}", {"checkpoint_storage": {"save_trial_latest": 2}})
    trial_id = other.get(f"/experiments/{eid}")["trials"][0]["id"]
    _refused(403, other.post, f"/trials/{trial_id}/kill")
    _refused(403, other.post, f"/trials/{trial_id}/training_metrics", {"steps_completed": 1, "metrics": {"loss": 1}})
    assert owner.get(f"/experiments/{eid}")["experiment"]["state"] == "ACTIVE", "nothing changed"
    assert owner.post(f"/experiments/{eid}/pause")["experiment"]["state"] == "PAUSED"
    assert admin.post(f"/experiments/{eid}/activate")["experiment"]["state"] == "ACTIVE"
    assert admin.patch(f"/experiments/{eid}", {"checkpoint_storage": {"save_trial_latest": 2}})["experiment"]
    assert owner.post(f"/experiments/{eid}/kill")["experiment"]["state"] == "CANCELED"
    _refused(404, other.post, "/experiments/999/pause")
    with master.master.read() as s:
        from determined.master.db import Experiment

        assert s.get(Experiment, eid).owner_id is not None


def test_archive_and_unarchive_are_owner_only(master: InProcessMaster, users: Dict[str, Any]) -> None:
    exp = create_experiment(users["owner"], max_trials=1)
    users["owner"].post(f"/experiments/{exp['id']}/kill")
    assert "owned by 'owner'" in _refused(403, users["other"].post, f"/experiments/{exp['id']}/archive")
    assert users["owner"].post(f"/experiments/{exp['id']}/archive")["experiment"]["archived"] is True
    _refused(403, users["other"].post, f"/experiments/{exp['id']}/unarchive")
    assert users["admin"].post(f"/experiments/{exp['id']}/unarchive")["experiment"]["archived"] is False


def _start_run(master: InProcessMaster, trial_id: int) -> str:
    with master.master.write() as s:
        _, token = allocations.start_allocation(s, s.get(Trial, trial_id))
    return token


def test_a_trial_token_reports_only_for_its_own_trial(master: InProcessMaster, users: Dict[str, Any]) -> None:
    exp = create_experiment(users["owner"], max_trials=2)
    t1, t2 = [t["id"] for t in users["owner"].get(f"/experiments/{exp['id']}")["trials"]]
    tok1, tok2 = _start_run(master, t1), _start_run(master, t2)
    one = master.raw(tok1)
    report = {"steps_completed": 5, "metrics": {"loss": 1.0}, "batch_metrics": []}
    one.post(f"/trials/{t1}/training_metrics", report)
    assert one.get(f"/trials/{t1}/searcher/operation") == {"length": 30, "searcher_length": 30}
    # another trial's routes: 403 for writes, and nothing recorded there
    for path in ("training_metrics", "validation_metrics", "checkpoints", "early_exit", "searcher/completed_operation"):
        message = _refused(403, one.post, f"/trials/{t2}/{path}", report)
        assert f"trial {t1}" in message
    assert users["owner"].get(f"/trials/{t2}")["training_metrics"] == []
    # reads of anything are fine; other writes are not
    assert one.get(f"/experiments/{exp['id']}")["experiment"]["id"] == exp["id"]
    assert one.get(f"/trials/{t2}/context")["trial_id"] == t2
    assert one.get("/me")["user"] == {**users["owner"].get("/me")["user"], "trial_id": t1}
    for method, path, body in [("POST", f"/experiments/{exp['id']}/kill", None), ("POST", f"/trials/{t1}/kill", None),
                               ("POST", "/experiments", {}), ("POST", "/users", {"username": "x"}),
                               ("PATCH", "/users/owner", {"password": "p"}), ("POST", "/models/m", {})]:
        _refused(403, one.request, method, path, json=body)
    assert users["owner"].get(f"/experiments/{exp['id']}")["experiment"]["state"] == "ACTIVE"
    # the run acknowledges its own preemption signal (a route under /allocations/), not another trial's
    with master.master.write() as s:
        alloc1, alloc2 = s.get(Trial, t1).allocation_id, s.get(Trial, t2).allocation_id
    one.post(f"/allocations/{alloc1}/signals/ack_preemption", {})
    _refused(403, one.post, f"/allocations/{alloc2}/signals/ack_preemption", {})
    # a new run of trial 1 ends the old token; the new one works
    new1 = _start_run(master, t1)
    for call, args in ((one.get, (f"/trials/{t1}/context",)),
                       (one.post, (f"/trials/{t1}/training_metrics", {**report, "steps_completed": 7}))):
        with pytest.raises(errors.APIError) as info:
            call(*args)
        assert info.value.status_code in (401, 409), str(info.value)  # 409 while the master still knows the token
    master.raw(new1).post(f"/trials/{t1}/training_metrics", {**report, "steps_completed": 6})
    steps = [m["steps_completed"] for m in users["owner"].get(f"/trials/{t1}")["training_metrics"]]
    assert 7 not in steps and 6 in steps
    assert master.raw(tok2).post(f"/trials/{t2}/training_metrics", report) is not None
