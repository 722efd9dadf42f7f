"""The job queue over REST (GET/POST /api/v1/job-queues): its order, who may update a job (owner, another user,
an admin), the checks on each update, `ahead_of`/`behind_of` as Determined 0.20-0.34 had them, and the
scheduler starting the job the queue shows first."""
from typing import Any, Dict, List, Optional

import pytest

from determined import errors
from determined.master.scheduling import pools, scheduler
from tests.auth._helpers import InProcessMaster, add_user
from tests.master._helpers import config, model_def


def _refused(status: int, call: Any, *args: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == status, str(info.value)
    return str(info.value)


@pytest.fixture
def users(master: InProcessMaster) -> Dict[str, Any]:
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    return {"admin": admin, "alice": master.session("alice", "a-pw"), "bob": master.session("bob", "b-pw")}


def submit(session: Any, priority: Optional[int] = None, name: str = "") -> str:
    cfg = config(max_trials=1, name=name)
    if priority is not None:
        cfg["resources"] = {"priority": priority}
    exp_id = session.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"]
    [job] = [j for j in session.get("/job-queues")["jobs"] if j["entity_id"] == str(exp_id)]
    return str(job["job_id"])


def order(session: Any) -> List[str]:
    jobs = session.get("/job-queues")["jobs"]
    assert [j["summary"]["jobs_ahead"] for j in jobs] == list(range(len(jobs)))
    return [j["name"] for j in jobs]


def update(session: Any, **control: Any) -> Dict[str, Any]:
    return session.post("/job-queues", {"updates": [control]})  # type: ignore[no-any-return]


def test_the_queue_lists_jobs_by_priority_and_only_owners_or_admins_change_them(users: Dict[str, Any]) -> None:
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    a = submit(alice, name="a")
    b = submit(bob, name="b")
    submit(alice, 10, name="c")
    assert order(bob) == ["c", "a", "b"]  # priority 10 first; then 42 by submission
    [job_a] = [j for j in bob.get("/job-queues")["jobs"] if j["job_id"] == a]
    assert (job_a["type"], job_a["username"], job_a["priority"], job_a["summary"]["state"],
            job_a["requested_slots"], job_a["allocated_slots"], job_a["resource_pool"]) == (
        "TYPE_EXPERIMENT", "alice", 42, "STATE_QUEUED", 1, 0, "default")

    message = _refused(403, lambda: update(bob, job_id=a, priority=1))
    assert "owned by 'alice'" in message and "'bob'" in message
    assert order(bob) == ["c", "a", "b"], "nothing changed"
    assert update(alice, job_id=a, priority=5)["jobs"][0]["priority"] == 5
    assert order(bob) == ["a", "c", "b"]
    update(admin, job_id=b, priority=1)  # an admin may change anyone's job
    assert order(alice) == ["b", "a", "c"]
    experiment_b = [j for j in bob.get("/job-queues")["jobs"] if j["job_id"] == b][0]["entity_id"]
    assert bob.get(f"/experiments/{experiment_b}")["experiment"]["config"]["resources"]["priority"] == 1

    for bad, words in (({"priority": 0}, "from 1"), ({"priority": 100}, "from 1"),
                       ({"weight": 2.0}, "fair_share"), ({"resource_pool": "gpus"}, "no resource pool named 'gpus'"),
                       ({"priority": 3, "weight": 1.0}, "exactly one")):
        assert words in _refused(400, lambda: update(alice, job_id=a, **bad)), bad
    assert "not in the queue" in _refused(404, lambda: update(alice, job_id="nope", priority=3))
    assert "resource_pool" in _refused(400, lambda: bob.get("/job-queues", params={"resource_pool": "gpus"}))


def test_ahead_of_and_behind_of_move_a_job_as_determined_0_34_did(master: InProcessMaster,
                                                                    users: Dict[str, Any]) -> None:
    alice, bob = users["alice"], users["bob"]
    a = submit(alice, name="a")
    b = submit(bob, name="b")
    c = submit(alice, name="c")
    d = submit(alice, 30, name="d")
    assert order(alice) == ["d", "a", "b", "c"]
    with master.master.write() as s:  # who starts first on one free slot: the job the queue shows first
        assert [t.experiment_id for t in scheduler.pick_trials(s, 1)] == [4]
    update(alice, job_id=c, ahead_of=a)
    assert order(alice) == ["d", "c", "a", "b"]
    update(alice, job_id=d, behind_of=b)  # d takes b's priority (42), then its place behind b
    assert order(alice) == ["c", "a", "b", "d"]
    assert [j["priority"] for j in alice.get("/job-queues")["jobs"]] == [42] * 4
    with master.master.write() as s:
        assert [t.experiment_id for t in scheduler.pick_trials(s, 1)] == [3]  # c, moved ahead, starts next
    assert "relative to itself" in _refused(400, lambda: update(alice, job_id=a, ahead_of=a))
    assert "owned by 'bob'" in _refused(403, lambda: update(alice, job_id=b, ahead_of=c))
    # Under fair share a queue position means nothing: refused, naming the scheduler.
    master.master.pools = pools.parse({"scheduler": {"type": "fair_share"}})
    assert "only with the priority scheduler" in _refused(400, lambda: update(alice, job_id=a, ahead_of=c))
    assert update(alice, job_id=a, weight=3)["jobs"][0]["weight"] == 3.0


def test_a_priority_limit_keeps_non_admins_below_it(master: InProcessMaster, users: Dict[str, Any]) -> None:
    master.master.pools = pools.parse({"priority_limit": 20})
    alice, admin = users["alice"], users["admin"]
    a = submit(alice, name="a")
    message = _refused(403, lambda: update(alice, job_id=a, priority=5))
    assert "priority_limit" in message and "20" in message
    assert update(alice, job_id=a, priority=20)["jobs"][0]["priority"] == 20
    assert update(admin, job_id=a, priority=1)["jobs"][0]["priority"] == 1


def test_pool_configs_of_every_era_get_what_their_release_did() -> None:
    assert pools.parse().pools["default"].scheduler == pools.SchedulerConfig("priority", False, 42)
    # A block without a type is priority since 0.34 (fair_share before); a pool's block replaces the cluster's.
    cluster = pools.parse({"scheduler": {"preemption": True}},
                          [{"pool_name": "a"}, {"pool_name": "b", "scheduler": {"type": "fair_share"}}])
    assert cluster.pools["a"].scheduler.preemption and cluster.pools["b"].scheduler.type == "fair_share"
    assert cluster.default_compute == "a" and cluster.pool_for("").name == "a"
    for rm, rp, words in (({"scheduler": {"type": "round_robin"}}, None, "removed in Determined 0.34.0"),
                          ({"scheduler": {"kind": "priority"}}, None, "unknown key(s) kind"),
                          ({"scheduler": {"default_priority": 0}}, None, "1 to 99"),
                          ({"default_compute_resource_pool": "gpu"}, None, "no resource pool named 'gpu'"),
                          (None, [{"pool_name": "a"}, {"pool_name": "a"}], "given twice"),
                          ({"priority_limit": 100}, None, "priority_limit")):
        with pytest.raises(pools.PoolConfigError, match=None) as info:
            pools.parse(rm, rp)
        assert words in str(info.value)


def test_submission_problems_name_the_pools_and_the_priority_limit() -> None:
    cluster = pools.parse({"priority_limit": 10}, [{"pool_name": "cpu"}, {"pool_name": "gpu"}])
    [unknown] = pools.submission_problems(cluster, {"resources": {"resource_pool": "tpu"}}, admin=True)
    assert "'tpu'" in unknown and "cpu, gpu" in unknown
    [limited] = pools.submission_problems(cluster, {"resources": {"priority": 5}}, admin=False)
    assert "priority_limit" in limited
    assert pools.submission_problems(cluster, {"resources": {"priority": 5, "resource_pool": "gpu"}}, admin=True) == []
