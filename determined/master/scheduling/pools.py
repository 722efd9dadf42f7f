"""Resource pools and their schedulers (Determined 0.38's master config `resource_pools` and
`resource_manager.scheduler`), read once when the master starts.

    resource_manager:
      scheduler: {type: priority, preemption: false, default_priority: 42}   # the cluster-wide scheduler
      default_compute_resource_pool: default
      default_aux_resource_pool: default
    resource_pools:
      - pool_name: default
        description: the machine's slots
        scheduler: {type: priority, preemption: true}   # replaces the cluster-wide one entirely

Scheduler types: `priority` (the default since 0.33; a smaller number runs first; 1-99, default 42; preempts only
with `preemption: true`), `fair_share` (deprecated in 0.34: slots in proportion to the jobs' weights; always
preempts to rebalance), `round_robin` (removed in 0.34: refused, naming the release). A block without `type` is
`priority` (0.34+). With no `resource_pools`, one pool named `default` holds every slot and is both defaults.
"""
import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy.orm import Session

PRIORITY = "priority"
FAIR_SHARE = "fair_share"
ROUND_ROBIN = "round_robin"
DEFAULT_POOL = "default"
POOLS_INFO = "determined.resource_pools"  # the key of the master's pools in its sessions' `info`
_SCHEDULER_KEYS = ("type", "preemption", "default_priority", "fitting_policy", "allow_heterogeneous_fits")


class PoolConfigError(ValueError):
    """A master config's `resource_pools`/`resource_manager.scheduler` that cannot be used (the message names the
    field and the fix)."""


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    type: str = PRIORITY
    preemption: bool = False
    default_priority: int = 42
    fitting_policy: str = "best"

    @property
    def preempts(self) -> bool:
        """Whether the pool's running trials give their slots up to others: fair share always rebalances."""
        return self.type == FAIR_SHARE or (self.type == PRIORITY and self.preemption)

    @property
    def wire_type(self) -> str:
        return {PRIORITY: "SCHEDULER_TYPE_PRIORITY", FAIR_SHARE: "SCHEDULER_TYPE_FAIR_SHARE"}[self.type]


@dataclasses.dataclass(frozen=True)
class RayPlacement:
    """Which Ray nodes a pool's trials go to: nodes with every label of `node_labels` (`ray start --labels`) and every
    custom resource of `resources` (`ray start --resources`), each slot taking that amount of it."""

    node_labels: Tuple[Tuple[str, str], ...] = ()
    resources: Tuple[Tuple[str, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class Pool:
    name: str
    description: str = ""
    scheduler: SchedulerConfig = SchedulerConfig()
    # The local resource manager's slots of this pool: slot indices (`slots`) or GPU ids (`gpus`); neither: the
    # slots no other pool names.
    slots: Optional[Tuple[int, ...]] = None
    gpus: Optional[Tuple[str, ...]] = None
    # The Ray resource manager's nodes of this pool (`ray:`): nodes with these labels (`node_labels`) and these
    # custom resources, of which each slot of the pool takes the given amount (`resources`); neither: the nodes no
    # other pool names.
    ray: Optional[RayPlacement] = None


@dataclasses.dataclass(frozen=True)
class ClusterPools:
    pools: Dict[str, Pool]
    default_compute: str = DEFAULT_POOL
    default_aux: str = DEFAULT_POOL
    # The smallest priority number (the highest priority) a non-admin may give a job; None: any of 1-99.
    priority_limit: Optional[int] = None

    def priority_problem(self, priority: int, *, admin: bool) -> Optional[str]:
        """Why a user may not give a job this priority (None: they may). Admins are not limited."""
        if admin or self.priority_limit is None or priority >= self.priority_limit:
            return None
        return (f"resources.priority: {priority} is above the highest priority this master lets users set "
                f"({self.priority_limit}; a smaller number runs first): use {self.priority_limit} or a larger number, "
                "or ask an admin (master config resource_manager.priority_limit)")

    @property
    def preempts(self) -> bool:
        """Whether the scheduler of any pool takes slots back from running trials."""
        return any(pool.scheduler.preempts for pool in self.pools.values())

    @property
    def splits_ray_nodes(self) -> bool:
        """Whether some pool names Ray nodes of its own (`ray:`)."""
        return any(p.ray is not None for p in self.pools.values())

    @property
    def splits_slots(self) -> bool:
        """Whether some pool names its own slots (else every pool draws from all of them)."""
        return any(p.slots is not None or p.gpus is not None for p in self.pools.values())

    def slot_ids(self, total: int, gpus: Sequence[str] = ()) -> Dict[str, List[int]]:
        """The slot indices (0..total-1) of each pool on a local resource manager with `total` slots (`gpus`: its
        GPU ids, by index). A pool that names none gets the slots no pool names. Raises PoolConfigError for a slot
        that does not exist or is named twice."""
        out: Dict[str, List[int]] = {}
        claimed: Dict[int, str] = {}
        for pool in self.pools.values():
            if pool.slots is None and pool.gpus is None:
                continue
            indices: List[int] = []
            for slot in pool.slots or ():
                if not 0 <= slot < total:
                    raise PoolConfigError(f"resource_pools: pool {pool.name!r} names slot {slot}, but this machine "
                                          f"has slots 0 to {total - 1}")
                indices.append(slot)
            for gpu in pool.gpus or ():
                if gpu not in gpus:
                    raise PoolConfigError(f"resource_pools: pool {pool.name!r} names GPU {gpu!r}, but this machine's "
                                          f"GPUs are {', '.join(gpus) or 'none'}")
                indices.append(list(gpus).index(gpu))
            for index in indices:
                if index in claimed:
                    raise PoolConfigError(f"resource_pools: slot {index} is in pool {claimed[index]!r} and in pool "
                                          f"{pool.name!r}; a slot belongs to one pool")
                claimed[index] = pool.name
            out[pool.name] = sorted(indices)
        rest = [i for i in range(total) if i not in claimed]
        for pool in self.pools.values():
            out.setdefault(pool.name, rest)
        return out

    def pool_for(self, name: str) -> Pool:
        """The pool a job asks for (empty: the default compute pool); an unknown name gets the default compute
        pool's settings (submission refuses unknown names; see `check_pool`)."""
        return self.pools.get(name or self.default_compute) or self.pools[self.default_compute]

    def check_pool(self, name: str) -> Optional[str]:
        """The problem of `resources.resource_pool: name`, or None."""
        if not name or name in self.pools:
            return None
        return (f"resources.resource_pool: no resource pool named {name!r}; the pools of this master are "
                f"{', '.join(sorted(self.pools))} (leave it empty for the default compute pool "
                f"{self.default_compute!r})")


DEFAULT = ClusterPools(pools={DEFAULT_POOL: Pool(DEFAULT_POOL, "the slots of this master's resource manager")})


def parse_scheduler(raw: Any, where: str, inherited: Optional[SchedulerConfig] = None) -> SchedulerConfig:
    if raw is None:
        return inherited or SchedulerConfig()
    if not isinstance(raw, Mapping):
        raise PoolConfigError(f"{where}: expected a mapping such as {{type: priority, preemption: true}}")
    unknown = sorted(set(raw) - set(_SCHEDULER_KEYS))
    if unknown:
        raise PoolConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(_SCHEDULER_KEYS)}")
    kind = raw.get("type") or PRIORITY  # a typeless block is priority since 0.34 (fair_share before)
    if kind == ROUND_ROBIN:
        raise PoolConfigError(f"{where}.type: round_robin was removed in Determined 0.34.0; use priority (the "
                              "default) or fair_share")
    if kind not in (PRIORITY, FAIR_SHARE):
        raise PoolConfigError(f"{where}.type: expected priority or fair_share, got {kind!r}")
    preemption = raw.get("preemption", False)
    if not isinstance(preemption, bool):
        raise PoolConfigError(f"{where}.preemption: expected true or false, got {preemption!r}")
    priority = raw.get("default_priority", 42)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 99:
        raise PoolConfigError(f"{where}.default_priority: expected an integer from 1 to 99, got {priority!r}")
    policy = raw.get("fitting_policy", "best")
    if policy not in ("best", "worst"):
        raise PoolConfigError(f"{where}.fitting_policy: expected best or worst, got {policy!r}")
    return SchedulerConfig(type=kind, preemption=preemption, default_priority=priority, fitting_policy=policy)


_RAY_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$")
_RAY_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")
_RAY_BUILTIN = ("CPU", "GPU", "memory", "object_store_memory")


def parse_ray(raw: Any, where: str) -> Optional[RayPlacement]:
    """A pool's `ray: {node_labels: {KEY: VALUE}, resources: {NAME: AMOUNT}}` (None when absent)."""
    if raw is None:
        return None
    example = "{node_labels: {pool: gpu}} or {resources: {pool_gpu: 1}}"
    if not isinstance(raw, Mapping) or not raw:
        raise PoolConfigError(f"{where}: expected a mapping such as {example}")
    unknown = sorted(str(k) for k in set(raw) - {"node_labels", "resources"})
    if unknown:
        raise PoolConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected node_labels and/or resources, "
                              f"e.g. {example}")
    labels, resources = raw.get("node_labels") or {}, raw.get("resources") or {}
    if not isinstance(labels, Mapping) or not isinstance(resources, Mapping) or not (labels or resources):
        raise PoolConfigError(f"{where}: node_labels and resources are mappings, and one of them names something; "
                              f"e.g. {example}")
    if len(labels) + len(resources) > 16:
        raise PoolConfigError(f"{where}: at most 16 node labels and resources in all")
    for key, value in labels.items():
        if not isinstance(key, str) or not _RAY_NAME.match(key) or key.startswith("ray.io/"):
            raise PoolConfigError(f"{where}.node_labels: {key!r} is not a label key a pool may name (letters, digits, "
                                  "'.', '_', '-', '/', at most 63; not Ray's own ray.io/ keys)")
        if not isinstance(value, str) or not _RAY_VALUE.match(value):
            raise PoolConfigError(f"{where}.node_labels.{key}: expected a label value as `ray start --labels "
                                  f"{key}=VALUE` gives it (letters, digits, '.', '_', '-'), got {value!r}")
    for name, amount in resources.items():
        if not isinstance(name, str) or not _RAY_NAME.match(name) or name in _RAY_BUILTIN:
            raise PoolConfigError(f"{where}.resources: {name!r} is not a custom resource name (CPU and GPU are the "
                                  "slots' own; name one given by `ray start --resources`)")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount <= 1e6:
            raise PoolConfigError(f"{where}.resources.{name}: expected the amount each slot takes, a positive number "
                                  f"(1 gives a node started with --resources '{{\"{name}\": 4}}' 4 slots), "
                                  f"got {amount!r}")
    return RayPlacement(tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                        tuple(sorted((str(k), float(v)) for k, v in resources.items())))


def parse(resource_manager: Any = None, resource_pools: Any = None) -> ClusterPools:
    """The pools of a master config's `resource_manager` and `resource_pools` sections (None: the defaults)."""
    rm = resource_manager or {}
    if not isinstance(rm, Mapping):
        raise PoolConfigError("resource_manager: expected a mapping")
    cluster_scheduler = parse_scheduler(rm.get("scheduler"), "resource_manager.scheduler")
    out: Dict[str, Pool] = {}
    if resource_pools is None or resource_pools == []:
        out[DEFAULT_POOL] = Pool(DEFAULT_POOL, "the slots of this master's resource manager", cluster_scheduler)
    elif not isinstance(resource_pools, list):
        raise PoolConfigError("resource_pools: expected a list of pools, each {pool_name, description, scheduler}")
    else:
        for i, raw in enumerate(resource_pools):
            where = f"resource_pools[{i}]"
            if not isinstance(raw, Mapping) or not isinstance(raw.get("pool_name"), str) or not raw["pool_name"]:
                raise PoolConfigError(f"{where}: expected a mapping with a non-empty pool_name")
            name = raw["pool_name"]
            if name in out:
                raise PoolConfigError(f"{where}.pool_name: {name!r} is given twice; pool names are unique")
            description = raw.get("description") or ""
            if not isinstance(description, str):
                raise PoolConfigError(f"{where}.description: expected text")
            # A pool's scheduler replaces the cluster's entirely (nothing is inherited field by field).
            scheduler = (parse_scheduler(raw["scheduler"], f"{where}.scheduler") if raw.get("scheduler") is not None
                         else cluster_scheduler)
            slots, gpus = raw.get("slots"), raw.get("gpus")
            if slots is not None and (not isinstance(slots, list) or not all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in slots)):
                raise PoolConfigError(f"{where}.slots: expected a list of slot indices (0, 1, ...)")
            if gpus is not None and (not isinstance(gpus, list) or not all(isinstance(g, (str, int)) for g in gpus)):
                raise PoolConfigError(f"{where}.gpus: expected a list of GPU ids (as CUDA_VISIBLE_DEVICES names them)")
            ray = parse_ray(raw.get("ray"), f"{where}.ray")
            if ray is not None and (slots is not None or gpus is not None):
                raise PoolConfigError(f"{where}: `ray` names Ray nodes and `slots`/`gpus` this machine's slots; give "
                                      "one of them (`ray` on the Ray resource manager, `slots`/`gpus` on the local "
                                      "one)")
            unknown = sorted(set(raw) - {"pool_name", "description", "scheduler", "slots", "gpus", "ray",
                                         "max_aux_containers_per_agent", "agent_reconnect_wait",
                                         "agent_reattach_enabled", "task_container_defaults"})
            if unknown:
                raise PoolConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; a pool has pool_name, "
                                      "description, scheduler, and slots or gpus (its share of this machine) or "
                                      "ray (its Ray nodes)")
            out[name] = Pool(name, description, scheduler, tuple(slots) if slots is not None else None,
                             tuple(str(g) for g in gpus) if gpus is not None else None, ray)
    compute = rm.get("default_compute_resource_pool") or rm.get("default_gpu_resource_pool") or (
        DEFAULT_POOL if DEFAULT_POOL in out else next(iter(out)))
    aux = rm.get("default_aux_resource_pool") or rm.get("default_cpu_resource_pool") or compute
    for key, value in (("default_compute_resource_pool", compute), ("default_aux_resource_pool", aux)):
        if value not in out:
            raise PoolConfigError(f"resource_manager.{key}: no resource pool named {value!r}; the pools are "
                                  f"{', '.join(sorted(out))}")
    limit = rm.get("priority_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 99):
        raise PoolConfigError(f"resource_manager.priority_limit: expected an integer from 1 to 99 (the highest "
                              f"priority non-admins may set), got {limit!r}")
    return ClusterPools(pools=out, default_compute=compute, default_aux=aux, priority_limit=limit)


def of_session(s: Session) -> ClusterPools:
    """The pools of the master whose session this is (the defaults for a session of no master)."""
    value = s.info.get(POOLS_INFO)
    value = value() if callable(value) else value  # the master's current pools (Master.pools)
    return value if isinstance(value, ClusterPools) else DEFAULT


def names(cluster: ClusterPools) -> List[str]:
    return sorted(cluster.pools)


def submission_problems(cluster: ClusterPools, config: Mapping[str, Any], *, admin: bool) -> List[str]:
    """The problems of an experiment's (or task's) `resources` on this master's pools, at submission: a pool that
    does not exist (the error lists the pools), a priority above the `priority_limit` of a non-admin."""
    resources = config.get("resources") if isinstance(config, Mapping) else None
    if not isinstance(resources, Mapping):
        return []
    problems: List[str] = []
    pool = resources.get("resource_pool") or ""
    problem = cluster.check_pool(str(pool))
    if problem:
        problems.append(problem)
    priority = resources.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        problem = cluster.priority_problem(priority, admin=admin)
        if problem:
            problems.append(problem)
    return problems
