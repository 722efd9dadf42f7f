"""`det agent disable|enable` of a Ray node through the routes (issue 32): anyone lists the agents, only an admin
disables or enables one (two users and an admin, on SQLite and PostgreSQL); a node Ray itself drains; a submission
too big for its Ray pool. The resource manager is a Ray one on
stand-in nodes (tests/ray/_fake_ray_nodes.py)."""
from typing import Any, List

import pytest
from sqlalchemy import select

from determined import errors
from determined.master.db import Trial
from determined.master.rm import ray_pools
from determined.master.scheduling import pools
from tests.auth._helpers import InProcessMaster, add_user, create_experiment
from tests.master._helpers import config, model_def
from tests.ray._fake_ray_nodes import N1, N3, NODES, POOLS, launch, manager


def test_only_admins_disable_a_ray_node_whose_trials_are_then_preempted(master: InProcessMaster) -> None:
    """Two users and an admin: anyone lists the agents; only the admin disables or enables one. Without --drain the
    trials on the node are asked to checkpoint and give their slots up (preempt_requested), with a note why; with
    --drain they are left to finish there."""
    rm = manager([{"pool_name": "default"}])
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    alice, bob = master.session("alice", "a-pw"), master.session("bob", "b-pw")
    exp = create_experiment(alice, max_trials=1)
    master.master.rm = rm  # the master's resource manager from now on: its agents are the nodes
    with master.master.write() as s:
        trial = s.scalars(select(Trial).where(Trial.experiment_id == exp["id"])).first()
        assert trial is not None
        trial.allocation_id, trial_id = "a-on-n3", trial.id
    run = launch(rm, "a-on-n3", "default")
    run.rank_nodes, run.node_ips = [N3], ["10.0.0.3"]
    assert {a["id"] for a in bob.get("/agents")["agents"]} == set(NODES)
    assert [s["allocation_id"] for s in bob.get(f"/agents/{N3}/slots")["slots"]] == ["a-on-n3", None]

    def pool() -> Any:
        (default,) = bob.get("/resource-pools")["resource_pools"]
        return default["slots_available"], default["slots_used"], default["num_agents"]

    assert pool() == (12, 1, 3)  # `det rp list`: the slots of the nodes, and the run's
    for who in (alice, bob):
        with pytest.raises(errors.APIError) as info:
            who.post(f"/agents/{N3}/disable", {})
        assert info.value.status_code == 403 and "only an admin may enable or disable an agent" in str(info.value)
    assert rm._disabled == {}
    with pytest.raises(errors.APIError) as info:
        admin.post("/agents/nosuchnode/disable", {})
    assert info.value.status_code == 404 and N3 in str(info.value)
    drained = admin.post(f"/agents/{N3[:10]}/disable", {"drain": True})["agent"]
    assert (drained["id"], drained["enabled"], drained["draining"]) == (N3, False, True)
    with master.master.read() as s:
        assert not s.get(Trial, trial_id).preempt_requested  # --drain: it finishes there
    assert pool() == (10, 0, 3)  # the disabled node's slots are out of the pool
    disabled = admin.post(f"/agents/{N3}/disable", {"agent_id": N3})["agent"]
    assert (disabled["enabled"], disabled["draining"]) == (False, False)
    with master.master.read() as s:
        assert s.get(Trial, trial_id).preempt_requested
    with pytest.raises(errors.APIError):
        alice.post(f"/agents/{N3}/enable", {})
    assert admin.post(f"/agents/{N3}/enable", {})["agent"]["enabled"] is True and rm._disabled == {}


def test_a_node_that_ray_drains_takes_no_new_run_and_its_trials_checkpoint_and_move(
        master: InProcessMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ray drain-node` (or an autoscaler taking a spot node back) marks the node DRAINING in Ray's GCS: the master
    treats it as `det agent disable --drain` (no new run, its slots out of the pools) and asks its trials, once, to
    checkpoint through the preemption signal (no restart spent) so that they resume on other nodes before the node
    goes; it cannot be enabled. Once Ray lets the node go, it is forgotten."""
    rm = manager([{"pool_name": "default"}])
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    alice = master.session("alice", "a-pw")
    exp = create_experiment(alice, max_trials=1)
    master.master.rm = rm
    with master.master.write() as s:
        trial = s.scalars(select(Trial).where(Trial.experiment_id == exp["id"])).one()
        trial.allocation_id, trial_id = "a-on-n3", trial.id
    launch(rm, "a-on-n3", "default").rank_nodes = [N3]
    launch(rm, "a-on-n1", "default").rank_nodes = [N1]
    notes: List[Any] = []
    monkeypatch.setattr(master.master, "_log_notes", lambda new, ended: notes.extend(new))
    drains = {N3: 1_900_000_000_000}  # what Ray's GCS answers: node id -> deadline (ms since the epoch)
    rm._read_ray_drains = lambda: dict(drains)

    master.master._move_off_leaving_nodes()  # what each scheduler tick does
    with master.master.read() as s:
        assert s.get(Trial, trial_id).preempt_requested
    assert [(t, text) for t, _, text in notes] == [(trial_id, (
        f"[master] Ray drains its node {N3} (gone by 2030-03-17 17:46:40 UTC): it checkpoints and gives its slots up; "
        "it resumes from that checkpoint when an agent takes it"))]
    agents = {a["id"]: a for a in alice.get("/agents")["agents"]}
    assert (agents[N3]["enabled"], agents[N3]["draining"]) == (False, True)
    assert (agents[N1]["enabled"], agents[N1]["draining"]) == (True, False)
    assert alice.get("/resource-pools")["resource_pools"][0]["slots_available"] == 10  # n3's 2 slots are out
    later = launch(rm, "a-later", "default").pg
    assert later.options["bundle_label_selector"] == [{ray_pools.NODE_ID_LABEL: f"!in({N3})"}]
    with pytest.raises(errors.APIError) as info:
        admin.post(f"/agents/{N3}/enable", {})
    assert info.value.status_code == 409 and "being drained by Ray" in str(info.value)

    with master.master.write() as s:  # the trial's run is asked once: a later tick does not ask it again
        s.get(Trial, trial_id).preempt_requested = False
    rm._drains_read_at = -1e9
    master.master._move_off_leaving_nodes()
    with master.master.read() as s:
        assert not s.get(Trial, trial_id).preempt_requested

    drains.clear()  # its runs moved; Ray let the node go
    del rm._alive[N3]
    rm._drains_read_at = -1e9
    assert rm.runs_leaving_nodes() == {} and N3 not in rm._disabled and rm._ray_drains == {}


def test_a_submission_too_big_for_its_ray_pool_is_refused_naming_the_pool(master: InProcessMaster) -> None:
    """`det experiment create` on Ray: a trial that cannot fit in its pool's nodes is refused (400, nothing stored)
    with an error naming the pool and its slots, as the local resource manager refuses more slots than it has."""
    rm = manager()
    rm._check_shared_fs = lambda host_path: []  # the storage check is not this test's
    master.master.rm, master.master.pools = rm, pools.parse({}, POOLS)
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    alice = master.session("alice", "a-pw")
    body = {"config": {**config(max_trials=1), "resources": {"slots_per_trial": 3, "resource_pool": "gpu"}},
            "model_definition": model_def()}
    with pytest.raises(errors.APIError) as info:
        alice.post("/experiments", body)
    assert info.value.status_code == 400 and "resource pool 'gpu' has only 2 cpu slot(s)" in str(info.value)
    assert alice.get("/experiments")["experiments"] == []
    body["config"]["resources"]["resource_pool"] = "big"  # n2 gives `big` 3 slots
    assert alice.post("/experiments", body)["experiment"]["config"]["resources"]["slots_per_trial"] == 3


def test_on_ray_a_tensorboard_goes_to_the_aux_pool_and_a_bound_pool_is_held_for_tasks(master: InProcessMaster) -> None:
    """Determined's rule for the pool of a task that names none: zero slots (a TensorBoard always) the workspace's
    default aux pool, else the cluster's; slots, the compute pool. A pool bound to another workspace is refused
    naming the binding, as for an experiment. The Ray resource manager places a task on its pool's nodes."""
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    alice = master.session("alice", "a-pw")
    exp = create_experiment(alice, max_trials=1)
    master.master.rm = manager()
    master.master.pools = pools.parse({"default_compute_resource_pool": "gpu", "default_aux_resource_pool": "default"},
                                      POOLS)

    def pool_of(path: str, body: Any) -> str:
        return str(alice.post(path, body)["task"]["resourcePool"])

    assert pool_of("/tensorboards", {"experiment_ids": [exp["id"]]}) == "default"  # the aux pool
    assert pool_of("/commands", {"config": {"entrypoint": ["true"], "resources": {"slots": 0}}}) == "default"
    assert pool_of("/commands", {"config": {"entrypoint": ["true"]}}) == "gpu"  # 1 slot: the compute pool
    admin.post("/workspaces", {"name": "team-big"})
    admin.post("/resource-pools/big/workspace-bindings", {"workspace_names": ["team-big"]})
    with pytest.raises(errors.APIError) as info:
        alice.post("/tensorboards", {"experiment_ids": [exp["id"]], "config": {"resources": {"resource_pool": "big"}}})
    assert info.value.status_code == 400 and "bound to workspace(s) 'team-big'" in str(info.value)
    team = next(w["id"] for w in admin.get("/workspaces")["workspaces"] if w["name"] == "team-big")
    admin.patch(f"/workspaces/{team}", {"default_aux_pool": "big"})  # the workspace's own aux pool
    assert pool_of("/tensorboards", {"experiment_ids": [exp["id"]], "workspace_id": team}) == "big"
