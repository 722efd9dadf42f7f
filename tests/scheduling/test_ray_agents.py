"""`det agent disable|enable` of a Ray node through the routes (issue 32): anyone lists the agents, only an admin
disables or enables one (two users and an admin, on SQLite and PostgreSQL). The resource manager is a Ray one on
stand-in nodes (tests/ray/_fake_ray_nodes.py)."""
from typing import Any

import pytest
from sqlalchemy import select

from determined import errors
from determined.master.db import Trial
from tests.auth._helpers import InProcessMaster, add_user, create_experiment
from tests.ray._fake_ray_nodes import N3, NODES, launch, manager


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
