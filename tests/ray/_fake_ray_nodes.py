"""A Ray resource manager on three stand-in nodes, for tests without a cluster: placement groups record what Ray was
asked for (bundles, label selectors), nothing is placed."""
from typing import Any, Dict, List

from determined.master.rm import ray as ray_rm
from determined.master.scheduling import pools

POOLS = [
    {"pool_name": "default"},
    {"pool_name": "gpu", "ray": {"node_labels": {"pool": "gpu"}}},
    {"pool_name": "big", "ray": {"resources": {"pool_big": 1}}},
    {"pool_name": "tpu", "ray": {"node_labels": {"pool": "tpu"}}},  # no node has it (yet)
]
NODES = {
    "n1" + "a" * 54: {"NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 2.0}, "Labels": {"pool": "gpu"}},
    "n2" + "b" * 54: {"NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 8.0, "pool_big": 3.0}, "Labels": {}},
    "n3" + "c" * 54: {"NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 2.0}, "Labels": {}},
}
N1, N2, N3 = sorted(NODES)


class _PG:
    def __init__(self, bundles: List[Dict[str, float]], **options: Any) -> None:
        self.bundles, self.options = bundles, options

    def ready(self) -> str:
        return "ready-ref"


def manager(pool_list: Any = POOLS) -> Any:
    rm: Any = object.__new__(ray_rm.RayResourceManager)
    rm._runs, rm._dead, rm._idle, rm._warming = {}, set(), [], []
    rm._placements, rm._disabled = {}, {}
    rm._ray_drains, rm._drains_read_at, rm._moved_off = {}, -1e9, set()  # Ray's own drains (`ray drain-node`)
    rm._read_ray_drains = lambda: {}  # no node drains; a test sets what Ray answers
    rm.trial_user, rm._storage_checks, rm._storage_bad = None, [], {}
    rm.slots = ray_rm.ClusterSlots(kind="cpu", total=12)
    rm.cpus_per_slot, rm.trial_host = 1.0, None
    rm._alive = dict(NODES)
    rm._refresh = lambda force=False: None
    rm._placement_group = lambda bundles, strategy, name, **options: _PG(bundles, **options)
    rm._watch = lambda ref: ref
    rm.released = []
    rm._release = lambda pg, actors: rm.released.append(pg)
    rm.warnings = rm.use_pools(pools.parse({}, pool_list))
    return rm


def launch(rm: Any, allocation_id: str, pool: str, slots: int = 1) -> Any:
    return rm.launch(trial_id=1, experiment_id=1, allocation_id=allocation_id, token="t", slots_needed=slots,
                     master_url="http://master", resource_pool=pool)
