"""Issue 32 on the Ray resource manager, without a cluster: resource pools that name Ray nodes (a node label or a
custom resource), each pool's slots, its runs' placement groups kept on its nodes; `det agent disable|enable` of a
node, whose runs are preempted to move, or with --drain left to finish; a node Ray itself drains; the submission
check of a trial's slots against its pool's nodes. Placement groups are stand-ins that record
what Ray was asked for (tests/ray/test_ray_rm.py runs a disabled node's trial on a real 2-node cluster;
tests/scheduling/test_ray_agents.py: who may disable a node, through the routes)."""
import pathlib
from typing import Any, List

import pytest

from determined import errors
from determined.master.master import Master
from determined.master.rm import ray as ray_rm
from determined.master.rm import ray_pools
from determined.master.scheduling import pools
from tests.ray._fake_ray_nodes import N1, N2, N3, POOLS, launch, manager

def test_ray_pools_are_read_and_wrong_ones_named() -> None:
    cluster = pools.parse({}, POOLS)
    assert cluster.splits_ray_nodes and not cluster.splits_slots
    assert cluster.pools["big"].ray == pools.RayPlacement((), (("pool_big", 1.0),))
    assert cluster.pools["gpu"].ray == pools.RayPlacement((("pool", "gpu"),), ())
    assert not pools.parse({}, [{"pool_name": "a"}]).splits_ray_nodes
    for ray, message in [
        ({"labels": {"pool": "gpu"}}, "unknown key(s) labels; expected node_labels and/or resources"),
        ({"resources": {"CPU": 1}}, "'CPU' is not a custom resource name"),
        ({"resources": {"pool_big": 0}}, "resources.pool_big: expected the amount each slot takes"),
        ({"node_labels": {"pool": "g p u"}}, "node_labels.pool: expected a label value"),
        ({"node_labels": {"ray.io/node-id": "x"}}, "not Ray's own ray.io/ keys"),
        ({"node_labels": {}}, "one of them names something"),
        ("gpu", "expected a mapping such as {node_labels: {pool: gpu}}"),
    ]:
        with pytest.raises(pools.PoolConfigError) as info:
            pools.parse({}, [{"pool_name": "p", "ray": ray}])
        assert message in str(info.value) and "resource_pools[0].ray" in str(info.value), (ray, str(info.value))
    with pytest.raises(pools.PoolConfigError) as info:
        pools.parse({}, [{"pool_name": "p", "slots": [0], "ray": {"node_labels": {"pool": "x"}}}])
    assert "give one of them" in str(info.value)


def test_a_master_refuses_ray_pools_on_the_local_resource_manager(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.DeterminedError) as info:
        Master(tmp_path / "data", run_scheduler=True, resource_pools=pools.parse({}, POOLS))
    assert "`ray` names Ray nodes" in str(info.value) and "--resource-manager ray" in str(info.value)


def test_each_pool_counts_the_slots_of_its_nodes_and_a_pool_without_nodes_is_a_warning() -> None:
    rm = manager()
    # gpu: n1's 2 slots; big: n2's 8 CPUs but 3 units of pool_big; default: the node no pool names (n3); tpu: none.
    assert rm.pool_totals() == {"default": 2, "gpu": 2, "big": 3, "tpu": 0}
    assert [w for w in rm.warnings if "'tpu'" in w and "label pool=tpu" in w and "wait until one joins" in w]
    assert not [w for w in rm.warnings if "'gpu'" in w or "'big'" in w]
    launch(rm, "a-big", "big", slots=2)
    launch(rm, "a-default", "default")
    assert rm.pool_free_slots() == {"default": 1, "gpu": 2, "big": 1, "tpu": 0}


def test_a_run_s_placement_group_asks_for_its_pool_s_nodes() -> None:
    rm = manager()
    big = launch(rm, "a-big", "big", slots=2).pg
    assert big.bundles == [{"CPU": 1.0, "pool_big": 1.0}] * 2 and "bundle_label_selector" not in big.options
    gpu = launch(rm, "a-gpu", "gpu").pg
    assert gpu.bundles == [{"CPU": 1.0}] and gpu.options["bundle_label_selector"] == [{"pool": "gpu"}]
    # The default pool names no nodes: it keeps off the nodes of the other pools.
    default = launch(rm, "a-default", "default").pg
    assert default.options["bundle_label_selector"] == [{ray_pools.NODE_ID_LABEL: f"!in({N1}, {N2})"}]
    # A master without Ray pools: any node, the plain bundle.
    plain = manager([{"pool_name": "default"}])
    assert launch(plain, "a", "default").pg.options == {}


def test_a_disabled_node_takes_no_new_run_and_names_its_runs() -> None:
    rm = manager([{"pool_name": "default"}])
    assert rm.free_slots() == 12
    run = launch(rm, "a-on-n3", "default")
    run.rank_nodes, run.node_ips = [N3], ["10.0.0.3"]
    assert rm.disable_node(N3, drain=False) == ["a-on-n3"]
    assert rm.free_slots() == 10  # n3's 2 slots are out; its run's slot was one of them
    later = launch(rm, "a-later", "default").pg
    assert later.options["bundle_label_selector"] == [{ray_pools.NODE_ID_LABEL: f"!in({N3})"}]
    agents = {a["id"]: a for a in rm.agents()}
    assert (agents[N3]["enabled"], agents[N3]["draining"], agents[N3]["containers"]) == (False, False, 1)
    assert rm.find_node(N3[:8]) == N3 and rm.find_node("n") is None
    rm.enable_node(N3)
    assert launch(rm, "a-again", "default").pg.options == {}


def test_kept_actors_go_only_to_runs_their_node_may_take() -> None:
    """A finished run's kept placement group goes to the next run of its pool; one made ready at start (before the
    pools were known: no custom resource in its bundle) to a run of a pool whose nodes include its node and that
    asks for no custom resource; one still being placed only while no pool has nodes of its own."""
    plain = manager([{"pool_name": "default"}, {"pool_name": "other"}])
    plain._warming.append(ray_rm.RayRun(0, 0, "warm-1", "", 1, "", "pg-warm", warming=True))
    assert launch(plain, "a1", "default").pg == "pg-warm"  # still being placed: taken
    rm = manager()
    rm._warming.append(ray_rm.RayRun(0, 0, "warm-2", "", 1, "", "pg-unplaced", warming=True))
    assert launch(rm, "a2", "gpu").pg != "pg-unplaced"  # where it lands is not known: the pool's own group
    for node, pool, taken in [(N1, "gpu", True), (N1, "default", False), (N2, "big", False), (N3, "default", True)]:
        rm._idle = [ray_rm._IdlePool(f"kept-{node}", ["actor"], [node], ["ip"], ["ip/0"], 1e18, {0: {"ip": "ip"}},
                                     made_ready=True)]
        rm._start = lambda run, where: None
        assert (launch(rm, f"a-{node}-{pool}", pool).pg == f"kept-{node}") == taken, (node, pool)
    rm._idle = [ray_rm._IdlePool("kept-big", ["actor"], [N2], ["ip"], ["ip/0"], 1e18, {0: {"ip": "ip"}}, pool="big")]
    assert launch(rm, "a-big-again", "big").pg == "kept-big"  # the same pool's: its bundle holds pool_big
    rm._idle[:] = [ray_rm._IdlePool("kept-n3", ["actor"], [N3], ["ip"], ["ip/0"], 1e18, {0: {"ip": "ip"}},
                                    pool="default")]
    rm.disable_node(N3, drain=True)
    assert launch(rm, "a-n3", "default").pg != "kept-n3"  # not on a disabled node


def test_a_trial_too_big_for_its_pool_or_its_largest_node_is_refused_naming_the_pool() -> None:
    """At submission (`check_experiment`): slots_per_trial within its pool's slots (those of the pool's nodes), and
    with is_single_node within the pool's largest node. A pool with no node now is no refusal: its trials wait for
    one (a node joining, an autoscaler). A node Ray drains does not count."""
    rm = manager()  # default: n3 (2 slots); gpu: n1 (2); big: n2 (3: its pool_big); tpu: no node

    def problems(**resources: Any) -> List[str]:
        return rm._capacity_problems(resources, int(resources.pop("slots_per_trial")))

    assert problems(slots_per_trial=2) == [] and problems(slots_per_trial=3, resource_pool="big") == []
    assert problems(slots_per_trial=3) == [
        "resources.slots_per_trial: 3 slots per trial, but resource pool 'default' has only 2 cpu slot(s) (1 CPU per "
        "slot) on 1 Ray node(s); lower slots_per_trial, choose another pool (`det rp list`), add Ray nodes to it, or "
        "start the master with a smaller --ray-cpus-per-slot"]
    [too_big] = problems(slots_per_trial=4, resource_pool="big")
    assert "resource pool 'big' has only 3 cpu slot(s)" in too_big
    assert problems(slots_per_trial=64, resource_pool="tpu") == []
    rm._default_pool = "gpu"  # an experiment that names no pool goes to the default compute pool
    assert "resource pool 'gpu' has only 2" in problems(slots_per_trial=3)[0]

    whole = manager([{"pool_name": "default"}])  # one pool: every node (2 + 8 + 2 slots)
    assert whole._capacity_problems({}, 12) == []
    assert "the Ray cluster has only 12 cpu slot(s)" in whole._capacity_problems({}, 13)[0]
    assert whole._capacity_problems({"is_single_node": True}, 8) == []
    [single] = whole._capacity_problems({"is_single_node": True}, 9)
    assert single.startswith("resources.slots_per_trial: 9 slots per trial on one node (resources.is_single_node), "
                             "but the largest Ray node of the Ray cluster has 8 cpu slot(s)")
    whole._ray_drains[N2] = (0, None)  # Ray drains the big node: it leaves
    assert "has only 4 cpu slot(s)" in whole._capacity_problems({}, 5)[0]
    # check_experiment gives them with its other checks (the storage check is not these tests')
    whole._check_shared_fs = lambda host_path: []
    assert "has only 4 cpu slot(s)" in whole.check_experiment({"resources": {"slots_per_trial": 5}})[0]


def test_ray_s_drain_ending_gives_the_node_its_own_state_back() -> None:
    rm = manager([{"pool_name": "default"}])
    rm.disable_node(N2, drain=False)  # an admin's `det agent disable`
    drains = {N2: 0}
    rm._read_ray_drains = lambda: dict(drains)
    assert rm.runs_leaving_nodes() == {} and rm._disabled[N2] is True
    assert {a["id"]: a["draining"] for a in rm.agents()}[N2] is True
    drains.clear()  # Ray gave the drain up: the node stays, as the admin left it
    rm._drains_read_at = -1e9
    rm.runs_leaving_nodes()
    assert rm._disabled == {N2: False} and rm.enable_node(N2) is None and rm._disabled == {}
