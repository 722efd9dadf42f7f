"""The Ray resource manager: each trial run is a placement group on a Ray cluster, one actor per slot.

A run on N slots gets a placement group of N bundles (`{"CPU": cpus_per_slot}`, or `{"GPU": 1, "CPU":
cpus_per_slot}` for GPU slots), strategy PACK. Once Ray has placed it, one `RankWorker` actor per bundle
starts one rank of the trial (`python -m determined.exec.harness`) with the trial's environment and its
ranks, ordered by node so that LOCAL_RANK, GROUP_RANK and DET_CROSS_* are right across nodes; rank 0's
node and two free ports there are the rendezvous (MASTER_ADDR/PORT, DET_CHIEF_IP/PORT). Output comes back
through one outstanding long-poll call per actor. Nothing here blocks the scheduler: every call is
collected later with `ray.wait(..., timeout=0)`, and `exit_listener` (set by the master to wake its
scheduler) is called as soon as a call it waits on finishes: a placement, an actor's answer, a rank's exit.

A run ends when all its ranks exited 0, or when one rank exits non-zero, its actor dies or its node goes
away: the other ranks are killed and the run is reported with a non-zero code (137 for a lost actor or
node), so the master restarts the trial from its latest checkpoint, on whatever nodes have room.

The placement group and the actors of a run whose ranks all exited 0 on their own (not preempted, not
killed) are kept for REUSE_S seconds, counted as free slots, like Ray Tune's reuse_actors: the next launch
of the same size takes them instead of waiting for a new placement group and new actor processes. They are
removed when not reused in time, when their node dies, when a launch of another size needs room, and at
once by `kill_all`. Every other run's placement group and actors are removed when it ends.

So that the first trials of a new master start as fast as the later ones, the manager makes WARM_SLOTS 1-slot
placement groups with their actors when it starts (`warm_slots`, or DET_RAY_WARM_SLOTS; 0: none), each actor
starting its fork server at once; they are kept WARM_POOL_S seconds like a finished run's, and a 1-slot launch
takes one, also while it is still being placed. A launch of another size releases them first.

A master with a trial user (`run_as_users`) hands each run its RunRequest: the node's worker starts it as the
submitting user's linked OS account in a bubblewrap sandbox it builds there (rm/sandbox.py), and the master names,
once, each node that cannot (its Ray worker is not root, or it has no bwrap). A shared_fs storage check that a busy
node does not answer in time does not refuse the submission: the trial waits (state "storage") for the answer.
"""
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import logging
import os
import signal
import socket
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from determined import errors
from determined.common import env_seconds
from determined.master.rm import _ray_worker, ray_pools, ray_tasks
from determined.master.rm.base import LogSink
from determined.master.rm.local import PRESTART_ENV, TERM_GRACE_S, WARM_ENV
from determined.master.rm.sandbox import RunRequest
from determined.master.rm.trial_env import TrialUser

logger = logging.getLogger("determined.master")

RAY_MISSING = "the Ray resource manager needs the ray package: pip install 'determined-revived[ray]'"
DEFAULT_TRIAL_COMMAND: Tuple[str, ...] = ("python", "-m", "determined.exec.harness")  # the node's own python
# What each actor keeps ready for its next run (determined/exec/prestart.py): the harness, already imported.
PRESTART_COMMAND: Tuple[str, ...] = ("python", "-m", "determined.exec.prestart")
LOST_CODE = 137  # exit code of a run whose actor or node died
DRAIN_WAIT_S = 1.0
VIEW_REFRESH_S = 1.0
REUSE_S = 1.0  # how long a finished run's placement group and actors wait for the next launch of its size
WARM_SLOTS = 8  # at most this many 1-slot placement groups are made ready when the manager starts ...
WARM_POOL_S = 30.0  # ... and kept this long for the first launches
STOP_GRACE_S = 5.0  # how long killed ranks get to report their exit before their actors are removed
CHIEF_DONE_GRACE_S = 60.0  # after the chief exited 0, how long the other ranks may take
# How long the storage check waits for every node (DET_RAY_CHECK_TIMEOUT_S overrides it).
STORAGE_CHECK_TIMEOUT_S = 15.0
STORAGE_CHECK_CACHE_S = 30.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise errors.DeterminedError(RAY_MISSING) from None
    return ray


def namespace_for(data_dir: "str | os.PathLike[str]") -> str:
    """The Ray namespace of the master of `data_dir`: masters of different data dirs never see each other."""
    digest = hashlib.sha1(str(os.path.realpath(data_dir)).encode()).hexdigest()[:12]
    return f"determined-{digest}"


def _probe(address: str) -> None:
    """Fail fast with a clear line when nothing listens at HOST:PORT (ray.init would retry for a minute)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise errors.DeterminedError(f"--ray-address {address!r}: expected HOST:PORT (the head's GCS port, "
                                     "6379 by default), `auto`, or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5.0).close()
    except OSError as e:
        raise errors.DeterminedError(
            f"cannot reach the Ray cluster at {address} ({e.strerror or e}); start its head with "
            f"`ray start --head --port {port}` or give the right address with --ray-address HOST:PORT") from None


def connect(address: Optional[str], namespace: str) -> str:
    """Connect this process (the master) to the Ray cluster as a driver; the address used.

    `address` None means $RAY_ADDRESS, else `auto` (the cluster started on this machine).
    """
    ray = import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or "auto"
    if ray.is_initialized():
        return address
    if address != "auto" and not address.startswith("ray://"):
        _probe(address)
    try:
        ray.init(address=address, namespace=namespace, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as e:  # ConnectionError, AuthenticationError, ...: a clear line, not a traceback
        first = (str(e).strip().splitlines() or [e.__class__.__name__])[0]
        hint = ("start a cluster with `ray start --head` or give its address with --ray-address HOST:PORT"
                if address == "auto" else "check --ray-address and that this machine may join the cluster "
                "(RAY_AUTH_TOKEN when the cluster uses token authentication)")
        raise errors.DeterminedError(f"cannot connect to the Ray cluster at {address}: {first}; {hint}") from None
    return address


def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return ip == "localhost"


def _own_addresses() -> Set[str]:
    own = {"127.0.0.1", "::1"}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            own.add(str(info[4][0]))
    except OSError:
        pass
    return own


def trial_master_host(listen_host: str) -> Optional[str]:
    """The host trial processes must use to reach a master listening on `listen_host` (None: its own URL).

    A master on loopback is refused when some Ray node is another machine; a master on every address
    (0.0.0.0, ::) is reached at this node's Ray IP.
    """
    ray = import_ray()
    own_ip = str(ray.util.get_node_ip_address())
    if listen_host in ("", "0.0.0.0", "::"):
        return own_ip
    if _is_loopback(listen_host):
        own = _own_addresses() | {own_ip}
        others = sorted({str(n["NodeManagerAddress"]) for n in ray.nodes() if n.get("Alive")
                         and not _is_loopback(str(n["NodeManagerAddress"])) and str(n["NodeManagerAddress"]) not in own})
        if others:
            raise errors.DeterminedError(
                f"the master would listen on {listen_host}, which trial processes on the Ray node(s) "
                f"{', '.join(others)} cannot reach; start it with --host 0.0.0.0 (trials then reach it at "
                f"{own_ip}) or --host with an address of this machine that the nodes can reach")
    return None


@dataclasses.dataclass
class ClusterSlots:
    """The Ray cluster's slots as the master's API shows them."""

    kind: str  # "gpu" or "cpu"
    total: int


@dataclasses.dataclass
class RayRun:
    """One run of a trial: its placement group, its actors (one per rank) and their outstanding calls."""

    trial_id: int
    experiment_id: int
    allocation_id: str
    token: str
    slots_needed: int
    master_url: str
    pg: Any
    script: bool = False  # one harness per node, holding the node's slots of the run (its command starts workers)
    pool: str = ""  # its resource pool (`use_pools`): the nodes it may go to
    state: str = "pending"  # (storage ->) pending -> placing -> running -> stopping; `exit_code` set when it ended
    ready_ref: Any = None
    where_refs: Dict[int, Any] = dataclasses.field(default_factory=dict)  # rank -> its `where` call
    wheres: Dict[int, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # rank -> its answer
    actors: List[Any] = dataclasses.field(default_factory=list)
    rank_nodes: List[str] = dataclasses.field(default_factory=list)  # node id of each rank
    node_ips: List[str] = dataclasses.field(default_factory=list)  # node IP of each rank
    slots: List[str] = dataclasses.field(default_factory=list)  # "IP/bundle" of each rank (cluster API)
    start_refs: Dict[int, Any] = dataclasses.field(default_factory=dict)
    drain_refs: Dict[int, Any] = dataclasses.field(default_factory=dict)
    kill_refs: Dict[int, Any] = dataclasses.field(default_factory=dict)
    user_env: Dict[str, str] = dataclasses.field(default_factory=dict)  # environment.environment_variables
    context: Optional[Dict[str, Any]] = None  # the run's context, handed to its processes (launch(context=...))
    run_as: Optional[Dict[str, Any]] = None  # its account and sandbox (a master with a trial user; see `run_as_users`)
    host_path: Optional[str] = None  # its shared_fs storage, which every node must see (see `_storage_wait`)
    exit_codes: Dict[int, int] = dataclasses.field(default_factory=dict)
    pid: Optional[int] = None  # rank 0's process on its node
    preempt_deadline: Optional[float] = None
    killed: bool = False
    stop_deadline: Optional[float] = None
    term_deadline: Optional[float] = None  # a killed script's run: SIGKILL after SIGTERM when this passes
    chief_done_at: Optional[float] = None
    exit_code: Optional[int] = None
    reused: bool = False  # its placement group and actors are a finished run's
    warming: bool = False  # no trial's: a 1-slot placement group made ready when the manager started
    warm_until: Optional[float] = None  # ... given up when not placed by then


@dataclasses.dataclass
class _IdlePool:
    """The placement group and actors of a finished run, kept until `until` for the next launch of its size."""

    pg: Any
    actors: List[Any]
    rank_nodes: List[str]
    node_ips: List[str]
    slots: List[str]
    until: float
    wheres: Dict[int, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # what its ranks said of themselves
    made_ready: bool = False  # made ready when the manager started, not left by a finished run
    pool: str = ""  # the resource pool of the run that left it


@dataclasses.dataclass
class _StorageCheck:
    """A storage check some node did not answer within its timeout at submission: its answers are awaited."""

    host_path: str
    marker_path: str
    refs: Dict[Any, str]  # the check task's ref -> its node id
    key: Tuple[str, frozenset]


def _storage_fix(host_path: str) -> str:
    return (f"use S3 checkpoint storage (checkpoint_storage: {{type: s3, bucket: ...}}) or mount one shared file "
            f"system at {host_path} on the master and every Ray node")


def _remove_marker(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _host_path(context: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The shared_fs host_path of the run's experiment (from its context), None for other storage."""
    storage = ((context or {}).get("config") or {}).get("checkpoint_storage") or {}
    if isinstance(storage, dict) and storage.get("type") == "shared_fs" and isinstance(storage.get("host_path"), str):
        return os.path.expanduser(storage["host_path"])
    return None


def _utc(ts: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).replace(tzinfo=None)


class RayResourceManager:
    """Runs trials on a Ray cluster this process is connected to (`connect()` first).

    `slot_type` "gpu" or "cpu" (default: gpu when the cluster has GPUs); `cpus_per_slot` CPUs of each slot
    (also each rank's OMP_NUM_THREADS). `trial_host` replaces the host of the master URL given to trials
    (see `trial_master_host`). `trial_command` replaces `python -m determined.exec.harness` ("python" is
    the node's own interpreter), for tests.
    """

    def __init__(
        self,
        work_root: str,
        log_sink: LogSink,
        *,
        slot_type: Optional[str] = None,
        cpus_per_slot: float = 1.0,
        trial_host: Optional[str] = None,
        trial_command: Optional[Sequence[str]] = None,
        storage_check_timeout: Optional[float] = None,
        warm_slots: Optional[int] = None,
    ) -> None:
        self._ray = import_ray()
        if not self._ray.is_initialized():
            raise errors.DeterminedError("the Ray resource manager needs a connection: call rm.ray.connect() first")
        if slot_type not in (None, "cpu", "gpu"):
            raise errors.DeterminedError(f"--ray-slot-type: expected cpu or gpu, not {slot_type!r}")
        if isinstance(cpus_per_slot, bool) or not isinstance(cpus_per_slot, (int, float)) or cpus_per_slot <= 0:
            raise errors.DeterminedError(f"--ray-cpus-per-slot: expected a positive number, not {cpus_per_slot!r}")
        from ray import cloudpickle
        from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

        self._placement_group = placement_group
        self._placement_group_table = placement_group_table
        self._remove_placement_group = remove_placement_group
        self._pg_strategy = PlacementGroupSchedulingStrategy
        self._node_strategy = NodeAffinitySchedulingStrategy
        # The node-side code travels by value: a worker then imports no more than the standard library and ray
        # (importing it by name would import determined.master, its web app and database: seconds per worker).
        cloudpickle.register_pickle_by_value(_ray_worker)
        self._worker_class = self._ray.remote(_ray_worker.RankWorker)
        self._check_task = self._ray.remote(_ray_worker.check_shared_path)
        self.work_root = work_root
        self.log_sink = log_sink
        self.cpus_per_slot = float(cpus_per_slot)
        self.trial_host = trial_host
        self.trial_command = list(trial_command) if trial_command else list(DEFAULT_TRIAL_COMMAND)
        # An actor kept for the next run has that run's harness process ready, unless DET_HARNESS_PRESTART=0
        # or the trial command is not the harness.
        self.prestart_command: Optional[List[str]] = (
            list(PRESTART_COMMAND) if self.trial_command == list(DEFAULT_TRIAL_COMMAND)
            and os.environ.get(PRESTART_ENV, "").strip() != "0" else None)
        # ... and forks it from a harness-only fork server of its own (determined/exec/forkserver.py), unless
        # DET_FORK_SERVER=0 too.
        self.fork_server = self.prestart_command is not None and os.environ.get(WARM_ENV, "").strip() != "0"
        self.storage_check_timeout = (storage_check_timeout if storage_check_timeout is not None
                                      else env_seconds("DET_RAY_CHECK_TIMEOUT_S", STORAGE_CHECK_TIMEOUT_S))
        self._runs: Dict[str, RayRun] = {}
        self._idle: List[_IdlePool] = []
        self._warming: List[RayRun] = []  # 1-slot placement groups being made ready for the first launches
        # Called (from a Ray thread) when a call the scheduler waits on finishes; the master sets it.
        self.exit_listener: Optional[Callable[[], None]] = None
        self._view_lock = threading.Lock()
        self._view_at = -1e9
        self._alive: Dict[str, Dict[str, Any]] = {}
        self._dead: Set[str] = set()
        self._storage_ok: Dict[Tuple[str, frozenset], float] = {}
        self._storage_checks: List[_StorageCheck] = []  # slow at submission: answers awaited
        self._storage_bad: Dict[str, str] = {}  # host_path -> what a node answered after the submission
        self.trial_user: Optional[TrialUser] = None  # set by `run_as_users`
        self._sandbox_paths: Dict[str, Any] = {}
        self._isolation_said: Set[str] = set()  # nodes whose lack of isolation the master has logged
        self._isolation_task = self._ray.remote(_ray_worker.isolation_problem)
        self._placements: Dict[str, Any] = {}  # resource pool -> its RayPlacement (None: no nodes of its own)
        self._disabled: Dict[str, bool] = {}  # node id -> whether it drains (`det agent disable [--drain]`)
        # Nodes Ray itself drains (`ray drain-node`, an autoscaler): node id -> (deadline in ms, 0: none; the node's
        # `_disabled` state before); read at most once a second; the runs already asked to move off them.
        self._ray_drains: Dict[str, Tuple[int, Optional[bool]]] = {}
        self._drains_read_at = -1e9
        self._moved_off: Set[str] = set()
        self._default_pool = ""  # the master's default compute pool (`use_pools`)
        self._tasks: Dict[str, ray_tasks.RayTask] = {}  # interactive tasks on the nodes (`launch_task`)
        self._refresh(force=True)
        kind = slot_type or ("gpu" if self.cluster_gpus() > 0 else "cpu")
        self.slots = ClusterSlots(kind=kind, total=0)
        self.slots.total = self._count_slots()
        self._warm_up(self._warm_count(warm_slots))

    # ------------------------------------------------------------ ready before the first launch

    def _warm_count(self, warm_slots: Optional[int]) -> int:
        if warm_slots is None:
            value = os.environ.get("DET_RAY_WARM_SLOTS", "").strip()
            if value:
                try:
                    warm_slots = int(value)
                except ValueError:
                    raise errors.DeterminedError(
                        f"DET_RAY_WARM_SLOTS: expected a number of slots (0: none), not {value!r}") from None
        if warm_slots is not None and (isinstance(warm_slots, bool) or warm_slots < 0):
            raise errors.DeterminedError(f"warm_slots: expected a number of slots (0: none), not {warm_slots!r}")
        wanted = WARM_SLOTS if warm_slots is None else int(warm_slots)
        return min(wanted, self.slots.total)

    def _warm_up(self, count: int) -> None:
        """Ask for `count` 1-slot placement groups; each gets its actor (which starts its fork server) once placed,
        and then waits WARM_POOL_S s as a kept pool for the first 1-slot launches."""
        for _ in range(count):
            entry = RayRun(0, 0, f"warm-{uuid.uuid4().hex[:12]}", "", 1, "", None, warming=True)
            entry.warm_until = time.monotonic() + WARM_POOL_S
            self._new_placement_group(entry)
            self._warming.append(entry)
        if count:
            logger.info("making %d %s slot(s) ready for the first trials (kept %.0f s)", count, self.slots.kind,
                        WARM_POOL_S)

    def _warmed(self, entry: RayRun) -> None:
        """A warming placement group's actor answered where it is: it waits as a kept pool."""
        self._warming.remove(entry)
        self._idle.append(_IdlePool(entry.pg, list(entry.actors), list(entry.rank_nodes), list(entry.node_ips),
                                    list(entry.slots), time.monotonic() + WARM_POOL_S, dict(entry.wheres),
                                    made_ready=True))

    def _adopt_warming(self, run: RayRun) -> bool:
        """Give a 1-slot run a placement group still being made ready (it continues where that one is)."""
        entry = next((w for w in self._warming if self._fits(run.pool, w.rank_nodes, False)), None)
        if entry is None:
            return False
        self._warming.remove(entry)
        run.pg, run.ready_ref, run.state = entry.pg, entry.ready_ref, entry.state
        run.actors, run.rank_nodes, run.node_ips, run.slots = entry.actors, entry.rank_nodes, entry.node_ips, entry.slots
        run.where_refs, run.wheres = entry.where_refs, entry.wheres
        return True

    def _release_warming(self, *, expired_only: bool = False) -> None:
        now = time.monotonic()
        for entry in list(self._warming):
            if (not expired_only or (entry.warm_until is not None and now > entry.warm_until)
                    or any(node in self._disabled for node in entry.rank_nodes)):
                self._warming.remove(entry)
                self._release(entry.pg, entry.actors)

    # ------------------------------------------------------------ the cluster

    def _refresh(self, force: bool = False) -> None:
        """Re-read the cluster's nodes, at most once a second unless `force`."""
        with self._view_lock:
            if not force and time.monotonic() - self._view_at < VIEW_REFRESH_S:
                return
            nodes = self._ray.nodes()
            self._alive = {str(n["NodeID"]): n for n in nodes if n.get("Alive")}
            self._dead = {str(n["NodeID"]) for n in nodes if not n.get("Alive")}
            self._view_at = time.monotonic()
            if hasattr(self, "slots"):
                self.slots.total = self._count_slots()

    def _node_slots(self, node: Mapping[str, Any]) -> int:
        resources = node.get("Resources") or {}
        by_cpu = int(float(resources.get("CPU", 0)) // self.cpus_per_slot)
        if self.slots.kind == "gpu":
            return min(int(float(resources.get("GPU", 0))), by_cpu)
        return by_cpu

    def _count_slots(self) -> int:
        return sum(self._node_slots(n) for n in self._alive.values())

    def cluster_gpus(self) -> int:
        return sum(int(float((n.get("Resources") or {}).get("GPU", 0))) for n in self._alive.values())

    def nodes(self) -> List[Dict[str, Any]]:
        """The alive nodes: id, IP and slots."""
        self._refresh()
        return [{"node_id": node_id, "ip": str(n["NodeManagerAddress"]), "slots": self._node_slots(n)}
                for node_id, n in sorted(self._alive.items(), key=lambda kv: str(kv[1]["NodeManagerAddress"]))]

    def describe(self) -> str:
        """One line: the slots per node, for `det master up`."""
        per_node = ", ".join(f"{n['ip']} ({n['node_id'][:8]}): {n['slots']}" for n in self.nodes())
        return (f"{self.total_slots} {self.slots.kind} slot(s) on {len(self._alive)} Ray node(s) "
                f"({self.cpus_per_slot:g} CPU per slot): {per_node}")

    @property
    def total_slots(self) -> int:
        self._refresh()
        return self.slots.total

    def free_slots(self) -> int:
        """The slots of the enabled nodes now, minus the ones this master's runs hold there (pending placements
        included)."""
        out = sum(self._node_slots(self._alive[n]) for n in list(self._disabled) if n in self._alive)
        total = self.total_slots - out
        held_by_tasks = sum(t.slots for t in self._live_tasks() if t.node_id not in self._disabled)
        return max(0, total - sum(self._held(run) for run in list(self._runs.values())) - held_by_tasks)

    def _held(self, run: RayRun) -> int:
        """The slots a run holds on enabled nodes (all of them while it is not placed)."""
        if not run.rank_nodes:
            return run.slots_needed
        return sum(1 for node in run.rank_nodes if node not in self._disabled)

    # ------------------------------------------------------------ resource pools and agents (the nodes)

    def use_pools(self, cluster: Any) -> List[str]:
        """Place the runs of each of the master's pools (scheduling/pools.py `ClusterPools`) on the nodes its `ray`
        placement names (rm/ray_pools.py); the warnings of pools no node matches now (nodes may join later)."""
        self._placements = {name: pool.ray for name, pool in cluster.pools.items()}
        self._default_pool = cluster.default_compute
        self._refresh(force=True)
        warnings = []
        for name, placement in sorted(self._placements.items()):
            if placement is None:
                continue
            nodes = ray_pools.pool_nodes(self._alive, self._placements, name)
            slots = sum(ray_pools.node_pool_slots(self._node_slots(self._alive[n]), self._alive[n], placement)
                        for n in nodes)
            wanted = ", ".join([f"label {k}={v}" for k, v in placement.node_labels]
                               + [f"resource {k} >= {v:g}" for k, v in placement.resources])
            if not slots:
                warnings.append(f"resource pool {name!r}: no Ray node has {wanted} now; its trials wait until one "
                                f"joins (ray start --labels KEY=VALUE / --resources '{{\"NAME\": N}}')")
            else:
                logger.info("resource pool %r: %d %s slot(s) on %d Ray node(s) with %s", name, slots, self.slots.kind,
                            len(nodes), wanted)
        for line in warnings:
            logger.warning(line)
        return warnings

    def _pool_node_ids(self, pool: str) -> List[str]:
        return ray_pools.pool_nodes(self._alive, self._placements, pool) if self._placements else list(self._alive)

    def pool_usage(self) -> Dict[str, Dict[str, Any]]:
        """Each pool's slots on its enabled nodes (`total`), those its runs hold there (`used`) and its nodes."""
        self._refresh()
        runs = list(self._runs.values())
        tasks = self._live_tasks()
        out = {}
        for name in self._placements or {"": None}:
            nodes = self._pool_node_ids(name)
            placement = self._placements.get(name)
            total = sum(ray_pools.node_pool_slots(self._node_slots(self._alive[n]), self._alive[n], placement)
                        for n in nodes if n not in self._disabled)
            # What runs hold on its enabled nodes (of any pool: a node two pools match serves both), and what its
            # runs not placed yet will take.
            mine = set(nodes) - set(self._disabled)
            used = sum(1 for run in runs for node in run.rank_nodes if node in mine)
            used += sum(run.slots_needed for run in runs if not run.rank_nodes and (run.pool == name or not
                                                                                  self._placements))
            used += sum(t.slots for t in tasks if t.node_id in mine or (t.node_id is None and (
                t.pool == name or not self._placements)))
            out[name] = {"total": total, "used": used, "nodes": nodes}
        return out

    def pool_totals(self) -> Dict[str, int]:
        return {name: usage["total"] for name, usage in self.pool_usage().items()}

    def pool_free_slots(self) -> Dict[str, int]:
        """The free slots of each pool (the scheduler's per-pool count)."""
        return {name: max(0, usage["total"] - usage["used"]) for name, usage in self.pool_usage().items()}

    def agents(self) -> List[Dict[str, Any]]:
        """The alive nodes as Determined's agents: id (the node id), ip, slots, the runs there, pools, enabled,
        draining."""
        self._refresh()
        runs = list(self._runs.values())
        pools_of: Dict[str, List[str]] = {}
        for name in self._placements:
            for node in self._pool_node_ids(name):
                pools_of.setdefault(node, []).append(name)
        out = []
        for node_id, n in sorted(self._alive.items(), key=lambda kv: (str(kv[1]["NodeManagerAddress"]), kv[0])):
            holders = [run for run in runs if node_id in run.rank_nodes]
            slots: List[Optional[str]] = [run.allocation_id for run in holders
                                          for node in run.rank_nodes if node == node_id]
            tasks_here = [t for t in self._live_tasks() if t.node_id == node_id]
            slots += [t.task_id for t in tasks_here for _ in range(t.slots)]
            count = self._node_slots(n)
            out.append({"id": node_id, "ip": str(n["NodeManagerAddress"]), "slots": count,
                        "slot_owners": (slots + [None] * count)[:max(count, len(slots))],
                        "containers": len(holders) + len(tasks_here),
                        "resource_pools": sorted(pools_of.get(node_id, [])),
                        "enabled": node_id not in self._disabled, "draining": self._disabled.get(node_id, False)})
        return out

    def find_node(self, agent_id: str) -> Optional[str]:
        """The alive node whose id is `agent_id`, or starts with it (at least 8 characters, one node only)."""
        self._refresh()
        if agent_id in self._alive:
            return agent_id
        found = [n for n in self._alive if len(agent_id) >= 8 and n.startswith(agent_id)]
        return found[0] if len(found) == 1 else None

    def disable_node(self, node_id: str, *, drain: bool) -> List[str]:
        """No new run goes to the node; the allocation ids of the runs on it (without `drain` the master preempts
        them: they checkpoint and resume on other nodes; with it they finish there)."""
        self._disabled[node_id] = bool(drain)
        logger.info("Ray node %s disabled%s", node_id, " (draining: its runs finish there)" if drain else
                    ": its runs checkpoint and move to other nodes")
        return [run.allocation_id for run in list(self._runs.values()) if node_id in run.rank_nodes]

    def enable_node(self, node_id: str) -> Optional[str]:
        """Let new runs go to the node again; why not (a node Ray itself drains), or None."""
        if node_id in self._ray_drains:
            return (f"Ray node {node_id} is being drained by Ray (`ray drain-node` or its autoscaler): it leaves the "
                    "cluster once its runs have moved, and cannot be enabled; a node that joins again is enabled")
        if self._disabled.pop(node_id, None) is not None:
            logger.info("Ray node %s enabled", node_id)
        return None

    def _read_ray_drains(self) -> Dict[str, int]:
        """Ray's own drains (`ray drain-node`, an autoscaler taking a node back): node id -> deadline (ms since the
        epoch; 0: none). Ray keeps a draining node alive, placing nothing new there, until what runs on it ends or
        its deadline passes; then the node is dead (DeathReason AUTOSCALER_DRAIN_*)."""
        try:
            from ray._private import state as ray_state

            return {str(node): int(deadline or 0) for node, deadline in ray_state.state.get_draining_nodes().items()}
        except Exception as e:  # an older Ray, or the GCS did not answer: the next read tries again
            logger.debug("cannot read Ray's draining nodes: %s", e)
            return {}

    def runs_leaving_nodes(self) -> Dict[str, str]:
        """The runs to move off nodes that Ray drains (allocation id -> why), each once. A draining node takes no new
        run (as `det agent disable --drain`); the master preempts its runs: they checkpoint before its deadline and
        resume on other nodes, spending no restart. Ray's drains are read at most once a second."""
        now = time.monotonic()
        if now - self._drains_read_at < VIEW_REFRESH_S:
            return {}
        self._drains_read_at = now
        drains = self._read_ray_drains()
        for node, deadline in drains.items():
            if node not in self._ray_drains:
                when = f"by {_utc(deadline / 1000):%Y-%m-%d %H:%M:%S} UTC" if deadline else "with no deadline"
                logger.warning("Ray drains node %s (%s): nothing new goes there; its runs checkpoint and move to other "
                               "nodes", node, when)
                self._ray_drains[node] = (deadline, self._disabled.get(node))
            self._disabled[node] = True
        for node in [n for n in self._ray_drains if n not in drains]:  # gone, or Ray gave the drain up
            _, before = self._ray_drains.pop(node)
            if before is None:
                self._disabled.pop(node, None)
            else:
                self._disabled[node] = before
        out: Dict[str, str] = {}
        for run in list(self._runs.values()):
            leaving = [node for node in run.rank_nodes if node in self._ray_drains]
            if leaving and run.allocation_id not in self._moved_off:
                self._moved_off.add(run.allocation_id)
                deadline = self._ray_drains[leaving[0]][0]
                out[run.allocation_id] = (f"Ray drains its node {leaving[0]}" + (
                    f" (gone by {_utc(deadline / 1000):%Y-%m-%d %H:%M:%S} UTC)" if deadline else ""))
        self._moved_off &= set(self._runs)
        return out

    def _pools_split(self) -> bool:
        """Whether some pool has nodes of its own (else every pool may use every node)."""
        return any(placement is not None for placement in self._placements.values())

    def _fits(self, pool: str, nodes: Sequence[str], carries_pool_resources: bool) -> bool:
        """Whether kept actors on `nodes` may take a run of `pool` (their bundles hold the pool's custom resources
        when `carries_pool_resources`)."""
        if not nodes or any(node in self._dead or node in self._disabled for node in nodes):
            return not nodes and not self._pools_split() and not self._disabled
        if not self._pools_split():
            return True
        placement = self._placements.get(pool)
        if placement is not None and placement.resources and not carries_pool_resources:
            return False
        allowed = set(self._pool_node_ids(pool))
        return all(node in allowed for node in nodes)

    def running(self) -> Dict[str, RayRun]:
        return dict(self._runs)

    # ------------------------------------------------------------ run-as users and the sandbox on the nodes

    @property
    def runs_as_users(self) -> bool:
        """Whether the master hands each launch its RunRequest (the account and sandbox of the run)."""
        return self.trial_user is not None

    def run_as_users(self, trial_user: TrialUser, *, data_dir: str, storage_roots: Sequence[str],
                     hidden: Sequence[str] = ()) -> None:
        """Run every trial as its submitting user's linked OS account, else `trial_user`, in a bubblewrap sandbox
        on its node (rm/sandbox.py, built there) that hides `data_dir` (the master's), `hidden` and the storage
        roots but what the run may read. Each node is asked now whether it can: a node whose Ray worker is not
        root, or that has no bwrap, is named in one warning saying what is not isolated there (its trials still
        run); a node that does not answer in time, or joins later, is named with its first trial."""
        self.trial_user = trial_user
        self._sandbox_paths = {"data_dir": str(data_dir), "storage_roots": [str(r) for r in storage_roots],
                               "hidden": [str(h) for h in hidden]}
        self._refresh(force=True)
        refs = {}
        for node_id in self._alive:
            task = self._isolation_task.options(num_cpus=0, max_retries=0,
                                                scheduling_strategy=self._node_strategy(node_id, soft=False))
            refs[task.remote()] = node_id
        ready, pending = self._ray.wait(list(refs), num_returns=len(refs), timeout=self.storage_check_timeout)
        for ref in ready:
            node_id = refs[ref]
            try:
                answer = self._ray.get(ref)
            except Exception as e:
                logger.warning("Ray node %s could not say whether it isolates trials: %s", node_id,
                               (str(e).strip().splitlines() or [e.__class__.__name__])[0])
                continue
            if answer["problem"]:
                self._say_not_isolated(node_id, str(answer["ip"]), str(answer["problem"]))
            else:
                logger.info("Ray node %s (node id %s): trials run as their users' OS accounts in a bubblewrap "
                            "sandbox", answer["ip"], node_id)
        for ref in pending:
            self._ray.cancel(ref, force=True)
            logger.info("Ray node %s did not say in time whether it isolates trials; its first trial will", refs[ref])

    @property
    def sandboxed(self) -> bool:
        """Whether trials run in a sandbox (which honours bind_mounts): run-as users, and no node said it cannot."""
        return self.trial_user is not None and not self._isolation_said

    def _say_not_isolated(self, node_id: str, ip: str, problem: str) -> None:
        if node_id in self._isolation_said:
            return
        self._isolation_said.add(node_id)
        logger.warning("TRIALS ARE NOT ISOLATED ON RAY NODE %s (node id %s): %s; see docs/auth.md", ip, node_id,
                       problem)

    # ------------------------------------------------------------ submission checks

    def check_experiment(self, config: Mapping[str, Any]) -> List[str]:
        """Problems of a config that cannot run on this cluster (empty: it can)."""
        self._refresh(force=True)
        problems: List[str] = []
        resources = config.get("resources") or {}
        wanted = int(1 if resources.get("slots_per_trial") is None else resources["slots_per_trial"])
        if wanted == 0:
            problems.append("resources.slots_per_trial: 0 (a trial with no slot) runs on the local resource manager "
                            "only; on the Ray resource manager give 1 or more (a Ray placement group needs a slot)")
        elif self.slots.kind == "gpu" and self.cluster_gpus() == 0:
            problems.append("resources.slots_per_trial: this master runs trials on GPU slots but the Ray cluster has "
                            "no GPU now; add GPU nodes, or start the master with --ray-slot-type cpu")
        else:
            problems += self._capacity_problems(resources, wanted)
        storage = config.get("checkpoint_storage") or {}
        if storage.get("type") == "shared_fs" and isinstance(storage.get("host_path"), str):
            problems += self._check_shared_fs(os.path.expanduser(storage["host_path"]))
        return problems

    def _capacity_problems(self, resources: Mapping[str, Any], wanted: int) -> List[str]:
        """Whether a trial of `wanted` slots fits in its resource pool: the slots of the pool's alive nodes (disabled
        ones included: they may be enabled again; not those Ray drains), and with `is_single_node` on its largest
        node. A pool with no node now is no problem: its trials wait until one joins (`use_pools` warned)."""
        pool = str(resources.get("resource_pool") or self._default_pool or "")
        nodes = [n for n in self._pool_node_ids(pool) if n in self._alive and n not in self._ray_drains]
        placement = self._placements.get(pool)
        per_node = [ray_pools.node_pool_slots(self._node_slots(self._alive[n]), self._alive[n], placement)
                    for n in nodes]
        total, largest = sum(per_node), max(per_node, default=0)
        if not nodes:
            return []
        where = f"resource pool {pool!r}" if self._pools_split() else "the Ray cluster"
        kind = f"{self.slots.kind} slot(s) ({self.cpus_per_slot:g} CPU per slot)"
        fixes = ("choose another pool (`det rp list`), add Ray nodes to it" if self._pools_split() else "add Ray nodes")
        if resources.get("is_single_node") and wanted > largest:
            return [f"resources.slots_per_trial: {wanted} slots per trial on one node (resources.is_single_node), but "
                    f"the largest Ray node of {where} has {largest} {kind} ({total} on its {len(nodes)} node(s)); "
                    f"lower slots_per_trial, set is_single_node: false, {fixes}, or start the master with a smaller "
                    "--ray-cpus-per-slot"]
        if wanted > total:
            return [f"resources.slots_per_trial: {wanted} slots per trial, but {where} has only {total} {kind} on "
                    f"{len(nodes)} Ray node(s); lower slots_per_trial, {fixes}, or start the master with a smaller "
                    "--ray-cpus-per-slot"]
        return []

    def _check_shared_fs(self, host_path: str) -> List[str]:
        """Every alive node must see the master's `host_path` as the same, writable directory.

        Only a definite answer refuses the submission (a node that does not see it, or cannot write there). A node
        that does not answer within the check's timeout (a busy cluster) does not: the submission is accepted, the
        node's answer is awaited (`_storage_checks`), and a trial with that storage waits before its placement
        group is asked for, with a note in its logs, until every node answered (`_storage_wait`)."""
        ray = self._ray
        nodes = dict(self._alive)
        key = (host_path, frozenset(nodes))
        if time.monotonic() - self._storage_ok.get(key, -1e9) < STORAGE_CHECK_CACHE_S:
            return []
        if host_path in self._storage_bad:
            return [self._storage_bad[host_path]]
        if any(check.host_path == host_path for check in self._storage_checks):
            return []  # being checked: the trials wait for its answer
        marker, expected = f".det-ray-check-{uuid.uuid4().hex}", uuid.uuid4().hex
        marker_path = os.path.join(host_path, marker)
        try:
            os.makedirs(host_path, exist_ok=True)
            with open(marker_path, "w") as f:
                f.write(expected)
        except OSError as e:
            return [f"checkpoint_storage.host_path: the master cannot write to {host_path} ({e.strerror or e}); "
                    f"{_storage_fix(host_path)}"]
        refs = {}
        for node_id in nodes:
            task = self._check_task.options(num_cpus=0, max_retries=0,
                                            scheduling_strategy=self._node_strategy(node_id, soft=False))
            refs[task.remote(host_path, marker, expected)] = node_id
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=self.storage_check_timeout)
        problems = [p for p in (self._storage_answer(host_path, refs[ref], ref) for ref in ready) if p]
        if pending and not problems:
            check = _StorageCheck(host_path, marker_path, {ref: refs[ref] for ref in pending}, key)
            self._storage_checks.append(check)
            logger.info("checkpoint_storage.host_path %s: Ray node(s) %s did not answer within %g s whether they see "
                        "it (a busy cluster); the experiment is accepted and its trials wait for the answer",
                        host_path, ", ".join(self._node_ip(n) for n in check.refs.values()), self.storage_check_timeout)
            return []
        for ref in pending:
            ray.cancel(ref, force=True)
        _remove_marker(marker_path)
        if not problems:
            self._storage_ok[key] = time.monotonic()
        return problems

    def _node_ip(self, node_id: str) -> str:
        return str((self._alive.get(node_id) or {}).get("NodeManagerAddress", node_id))

    def _storage_answer(self, host_path: str, node_id: str, ref: Any) -> Optional[str]:
        """The problem a node's answer shows (None: it sees `host_path` and may write there)."""
        ip = self._node_ip(node_id)
        try:
            seen = self._ray.get(ref)
        except Exception as e:
            return (f"checkpoint_storage.host_path: could not check {host_path} on Ray node {ip} (node id {node_id}): "
                    f"{str(e).strip().splitlines()[0] if str(e).strip() else e}")
        if not seen["sees_marker"]:
            return (f"checkpoint_storage.host_path: {host_path} on the master is not the same directory on Ray node "
                    f"{ip} (node id {node_id}){': ' + seen['error'] if seen['error'] else ''}; trials there could not "
                    f"save or restore checkpoints; {_storage_fix(host_path)}")
        if not seen["writable"]:
            return (f"checkpoint_storage.host_path: Ray node {ip} (node id {node_id}) sees {host_path} but "
                    f"{seen['error']}; give the user of the Ray processes write access")
        return None

    def _collect_storage_checks(self) -> None:
        """Take the answers of the storage checks that were slow at submission, without waiting."""
        for check in list(self._storage_checks):
            for ref, node_id in list(check.refs.items()):
                if node_id in self._dead:  # a node that went away no longer needs to see it
                    self._ray.cancel(ref, force=True)
                    del check.refs[ref]
            if check.refs:
                ready, _ = self._ray.wait(list(check.refs), num_returns=len(check.refs), timeout=0)
                for ref in ready:
                    problem = self._storage_answer(check.host_path, check.refs.pop(ref), ref)
                    if problem and check.host_path not in self._storage_bad:
                        self._storage_bad[check.host_path] = problem
                        logger.warning("%s (answered after the submission; its trials do not start)", problem)
            if not check.refs:
                self._storage_checks.remove(check)
                _remove_marker(check.marker_path)
                if check.host_path not in self._storage_bad:
                    self._storage_ok[check.key] = time.monotonic()

    def _storage_wait(self, run: RayRun) -> Optional[str]:
        """What the run waits for before it asks for its placement group ("" : nothing; None: its storage is known not
        to be visible on every node: `_storage_bad`)."""
        if run.host_path is None:
            return ""
        if run.host_path in self._storage_bad:
            return None
        pending = [n for c in self._storage_checks if c.host_path == run.host_path for n in c.refs.values()]
        if not pending:
            return ""
        return (f"Ray node(s) {', '.join(self._node_ip(n) for n in pending)} to answer whether they see "
                f"checkpoint_storage.host_path {run.host_path} (the cluster is busy); the trial starts once they do")

    # ------------------------------------------------------------ lifecycle

    def _bundle(self) -> Dict[str, float]:
        if self.slots.kind == "gpu":
            return {"GPU": 1.0, "CPU": self.cpus_per_slot}
        return {"CPU": self.cpus_per_slot}

    # The master may give `launch` the run's context (see LocalResourceManager.hands_over_context): each actor
    # writes it into its run directory on its node, and the harness reads it there instead of asking the master.
    hands_over_context = True

    def launch(self, *, trial_id: int, experiment_id: int, allocation_id: str, token: str, slots_needed: int,
               master_url: str, env: Optional[Mapping[str, str]] = None, script: bool = False,
               context: Optional[Mapping[str, Any]] = None, run: Optional[RunRequest] = None,
               resource_pool: str = "") -> RayRun:
        """Ask Ray for a placement group of `slots_needed` slots (or take a finished run's); it starts once placed.

        `env`: the experiment's own environment variables (the platform's DET_* variables win over them). A
        `script` run starts one harness per node (on the node's first actor), which holds that node's slots.
        `context`: the run's context, handed to its processes. `run`: its account and what its sandbox shows
        (with `run_as_users`). `resource_pool`: the pool whose nodes it goes to (`use_pools`)."""
        request = run
        run = RayRun(trial_id, experiment_id, allocation_id, token, slots_needed, self._trial_url(master_url), None,
                     script=script, pool=resource_pool if resource_pool in self._placements else "")
        run.user_env = dict(env or {})
        run.context = dict(context) if context is not None else None
        if self.trial_user is not None:
            run.run_as = {"request": request or RunRequest(), "default": self.trial_user, **self._sandbox_paths}
        run.host_path = _host_path(context)
        self._collect_storage_checks()
        waits_for = self._storage_wait(run)
        if waits_for != "":
            run.state = "storage"
            self._runs[allocation_id] = run
            note = (f"waits for {waits_for}" if waits_for
                    else "cannot start: " + self._storage_bad[run.host_path or ""])
            self._log(run, 0, "stdout", f"[ray] run {allocation_id} {note}", time.time())
            logger.info("trial %s: run %s %s", trial_id, allocation_id, note)
            return run
        return self._take_slots(run)

    def _take_slots(self, run: RayRun) -> RayRun:
        """A finished run's placement group and actors, one made ready at start, or a new placement group."""
        trial_id, allocation_id, slots_needed, script = run.trial_id, run.allocation_id, run.slots_needed, run.script
        pool = next((p for p in self._idle if len(p.actors) == slots_needed and (p.pool == run.pool or p.made_ready)
                     and self._fits(run.pool, p.rank_nodes, not p.made_ready)), None)
        if pool is not None:
            self._idle.remove(pool)
            run.pg, run.actors, run.rank_nodes, run.node_ips, run.slots = (
                pool.pg, pool.actors, pool.rank_nodes, pool.node_ips, pool.slots)
            run.reused = True
            self._runs[allocation_id] = run
            if slots_needed == 1 and not script and pool.wheres.get(0):
                # One rank, no rendezvous: where its actor is has not changed, so it starts now (no `where` call)
                run.wheres = dict(pool.wheres)
                self._start(run, run.wheres[0])
            else:
                self._ask_where(run)
                run.state = "placing"
            if pool.made_ready:
                logger.info("trial %s: run %s takes a placement group made ready at start (placed)", trial_id,
                            allocation_id)
            else:
                logger.info("trial %s: run %s reuses the placement group and actors of a finished run on %s %s "
                            "slot(s)", trial_id, allocation_id, slots_needed, self.slots.kind)
            return run
        if slots_needed == 1 and not script and self._adopt_warming(run):
            self._runs[allocation_id] = run
            logger.info("trial %s: run %s takes a placement group made ready at start (%s)", trial_id,
                        allocation_id, run.state)
            return run
        self._release_idle()  # their resources may be what the new placement group needs
        self._release_warming()
        self._new_placement_group(run)
        self._runs[allocation_id] = run
        logger.info("trial %s: run %s waits for a placement group of %s %s slot(s)", trial_id, allocation_id,
                    slots_needed, self.slots.kind)
        return run

    def _new_placement_group(self, run: RayRun) -> None:
        placement = self._placements.get(run.pool)
        excluded = set(self._disabled)
        if placement is None and self._placements:  # a pool without nodes of its own: not the other pools' nodes
            excluded |= set(self._alive) - set(self._pool_node_ids(run.pool))
        selector = ray_pools.label_selector(placement, excluded)
        options: Dict[str, Any] = {"bundle_label_selector": [selector] * run.slots_needed} if selector else {}
        run.pg = self._placement_group([ray_pools.bundle(self._bundle(), placement) for _ in range(run.slots_needed)],
                                       strategy="PACK", name=f"det-{run.allocation_id}", **options)
        run.ready_ref = self._watch(run.pg.ready())
        run.state = "pending"

    def _watch(self, ref: Any) -> Any:
        """`ref`, which calls `exit_listener` when it finishes (a drain only when its rank exited)."""
        def done(future: Any) -> None:
            listener = self.exit_listener
            if listener is None:
                return
            try:
                value = future.result()
                if isinstance(value, tuple) and len(value) == 2 and value[1] is None:
                    return  # a drain that only brought output: the next tick takes it
            except Exception:
                pass
            listener()

        try:
            ref.future().add_done_callback(done)
        except Exception as e:  # the scheduler then sees it at its next poll
            logger.debug("cannot watch a Ray call: %s", e)
        return ref

    def _trial_url(self, master_url: str) -> str:
        if not self.trial_host:
            return master_url
        parts = urllib.parse.urlsplit(master_url)
        host = f"[{self.trial_host}]" if ":" in self.trial_host else self.trial_host
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))

    def _place(self, run: RayRun) -> None:
        """The placement group is ready: one actor per bundle, ranks ordered by node."""
        table = self._placement_group_table(run.pg)
        bundle_nodes = {int(k): str(v) for k, v in (table.get("bundles_to_node_id") or {}).items()}
        node_order: List[str] = []
        for index in range(run.slots_needed):
            node = bundle_nodes.get(index, "")
            if node not in node_order:
                node_order.append(node)
        ranked = sorted(range(run.slots_needed), key=lambda i: (node_order.index(bundle_nodes.get(i, "")), i))
        self._refresh()
        for bundle in ranked:
            node = bundle_nodes.get(bundle, "")
            ip = str((self._alive.get(node) or {}).get("NodeManagerAddress", "?"))
            actor = self._worker_class.options(
                num_cpus=self.cpus_per_slot, num_gpus=1 if self.slots.kind == "gpu" else 0, max_concurrency=4,
                max_restarts=0, scheduling_strategy=self._pg_strategy(
                    placement_group=run.pg, placement_group_bundle_index=bundle),
            ).remote()
            run.actors.append(actor)
            run.rank_nodes.append(node)
            run.node_ips.append(ip)
            run.slots.append(f"{ip}/{bundle}")
        self._ask_where(run)
        run.state = "placing"

    def _ask_where(self, run: RayRun) -> None:
        """Ask rank 0 (a script run: every rank, for the GPUs of each node) where it is."""
        ranks = range(len(run.actors)) if run.script else [0]
        run.wheres = {}
        run.where_refs = {rank: self._watch(run.actors[rank].where.remote()) for rank in ranks}

    def _containers(self, run: RayRun) -> List[List[int]]:
        """The ranks of each node of the run, in node order: one container per node, as Determined's agents."""
        containers: Dict[str, List[int]] = {}
        for rank, node in enumerate(run.rank_nodes):
            containers.setdefault(node, []).append(rank)
        return list(containers.values())

    def _container_env(self, run: RayRun, container: int, containers: List[List[int]]) -> Dict[str, str]:
        """What a node's harness knows of the run's containers (DET_CONTAINER_*), and its own slots and GPUs."""
        ranks = containers[container]
        env = {
            "DET_SLOT_IDS": json.dumps(ranks),
            "DET_AGENT_ID": run.rank_nodes[ranks[0]],
            "DET_CONTAINER_ADDRS": json.dumps([run.node_ips[c[0]] for c in containers]),
            "DET_CONTAINER_RANK": str(container),
            "DET_CONTAINER_SLOT_COUNTS": json.dumps([len(c) for c in containers]),
        }
        if run.script:
            chief = run.wheres.get(0) or {}
            env["C10D_PORT"] = str((chief.get("ports") or [29400])[0])  # torch's rendezvous on the chief's node
            env["DET_CHIEF_PORT"] = str((chief.get("ports") or [0, 12360])[1])
            if self.slots.kind == "gpu":
                gpus = [g for rank in ranks for g in (run.wheres.get(rank) or {}).get("gpu_ids", [])]
                env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        return env

    def _start(self, run: RayRun, chief: Dict[str, Any]) -> None:
        """Rank 0 told its address and ports: start every rank's trial process and its log long-poll (a script
        run: one process per node, on the node's first rank)."""
        if run.script:
            self._start_containers(run)
            return
        containers = self._containers(run)
        container_of = {rank: i for i, ranks in enumerate(containers) for rank in ranks}
        size = run.slots_needed
        local_sizes: Dict[str, int] = {}
        for node in run.rank_nodes:
            local_sizes[node] = local_sizes.get(node, 0) + 1
        node_order = list(dict.fromkeys(run.rank_nodes))
        seen: Dict[str, int] = {}
        for rank, actor in enumerate(run.actors):
            node = run.rank_nodes[rank]
            env = {
                "OMP_NUM_THREADS": str(max(1, int(self.cpus_per_slot))),
                **run.user_env,  # the experiment's variables; the platform's own below win
                "DET_MASTER": run.master_url,
                "DET_TRIAL_ID": str(run.trial_id),
                "DET_EXPERIMENT_ID": str(run.experiment_id),
                "DET_ALLOCATION_ID": run.allocation_id,
                "DET_SESSION_TOKEN": run.token,
                "DET_RAY_NODE_ID": node,
                "DET_RAY_NODE_IP": run.node_ips[rank],
                **self._container_env(run, container_of[rank], containers),
            }
            if size > 1:
                env.update({
                    "RANK": str(rank),
                    "LOCAL_RANK": str(seen.get(node, 0)),
                    "WORLD_SIZE": str(size),
                    "LOCAL_WORLD_SIZE": str(local_sizes[node]),
                    "GROUP_RANK": str(node_order.index(node)),
                    "DET_CROSS_RANK": str(node_order.index(node)),
                    "DET_CROSS_SIZE": str(len(node_order)),
                    "MASTER_ADDR": str(chief["ip"]),
                    "MASTER_PORT": str(chief["ports"][0]),
                    "DET_CHIEF_IP": str(chief["ip"]),
                    "DET_CHIEF_PORT": str(chief["ports"][1]),
                })
            seen[node] = seen.get(node, 0) + 1
            self._log(run, rank, "stdout",
                      f"[ray] run {run.allocation_id}: rank {rank} on node {run.node_ips[rank]} (node id {node})",
                      time.time())
            run.start_refs[rank] = self._watch(self._start_call(run, actor, env))
            run.drain_refs[rank] = self._watch(actor.drain.remote(DRAIN_WAIT_S, run.allocation_id))
        run.state = "running"
        logger.info("trial %s: run %s started on Ray node(s) %s; it reaches the master at %s", run.trial_id,
                    run.allocation_id, ", ".join(f"{ip} ({n[:8]})" for ip, n in zip(run.node_ips, run.rank_nodes)),
                    run.master_url)

    def _start_containers(self, run: RayRun) -> None:
        containers = self._containers(run)
        for container, ranks in enumerate(containers):
            leader = ranks[0]
            for rank in ranks[1:]:  # they hold their slot for the leader's process: nothing to run
                run.exit_codes[rank] = 0
            env = {
                "OMP_NUM_THREADS": str(max(1, int(self.cpus_per_slot * len(ranks)))),
                **run.user_env,  # the experiment's variables; the platform's own below win
                "DET_MASTER": run.master_url,
                "DET_TRIAL_ID": str(run.trial_id),
                "DET_EXPERIMENT_ID": str(run.experiment_id),
                "DET_ALLOCATION_ID": run.allocation_id,
                "DET_SESSION_TOKEN": run.token,
                "DET_RAY_NODE_ID": run.rank_nodes[leader],
                "DET_RAY_NODE_IP": run.node_ips[leader],
                **self._container_env(run, container, containers),
            }
            self._log(run, leader, "stdout",
                      f"[ray] run {run.allocation_id}: rank {leader} on node {run.node_ips[leader]} (node id "
                      f"{run.rank_nodes[leader]}) runs container {container} of {len(containers)} with "
                      f"{len(ranks)} slot(s)", time.time())
            actor = run.actors[leader]
            run.start_refs[leader] = self._watch(self._start_call(run, actor, env))
            run.drain_refs[leader] = self._watch(actor.drain.remote(DRAIN_WAIT_S, run.allocation_id))
        run.state = "running"
        logger.info("trial %s: run %s started on Ray node(s) %s in %d container(s); it reaches the master at %s",
                    run.trial_id, run.allocation_id, ", ".join(sorted(set(run.node_ips))), len(containers),
                    run.master_url)

    def _start_call(self, run: RayRun, actor: Any, env: Dict[str, str]) -> Any:
        """The actor's `start` call of one rank (a run as a user's account starts cold: no fork server, no
        prestarted process, which are the worker's own user's)."""
        if run.run_as is not None:
            return actor.start.remote(self.trial_command, env, None, fork_server=False, context=run.context,
                                      run_as=run.run_as)
        return actor.start.remote(self.trial_command, env, self.prestart_command, fork_server=self.fork_server,
                                  context=run.context)

    def _log(self, run: RayRun, rank: int, stream: str, line: str, ts: float) -> None:
        # A script's own launcher prefixes its workers' lines with their ranks (determined.launch.wrap_rank).
        prefix = f"[rank {rank}] " if run.slots_needed > 1 and not run.script else ""
        self.log_sink(run.trial_id, _utc(ts), stream, prefix + line)

    def _lost(self, run: RayRun, rank: int, why: str) -> None:
        if rank not in run.exit_codes:
            run.exit_codes[rank] = LOST_CODE
            self._log(run, rank, "stderr", f"[ray] run {run.allocation_id}: rank {rank} lost: {why}", time.time())
            logger.warning("trial %s: rank %s of run %s lost: %s", run.trial_id, rank, run.allocation_id, why)

    def _collect(self) -> None:
        """Take the results of every call that has finished, without waiting."""
        ray = self._ray
        pending: Dict[Any, Tuple[RayRun, str, int]] = {}
        for run in [*self._runs.values(), *self._warming]:
            if run.ready_ref is not None:
                pending[run.ready_ref] = (run, "ready", 0)
            for rank, ref in run.where_refs.items():
                pending[ref] = (run, "where", rank)
            for kind, refs in (("start", run.start_refs), ("drain", run.drain_refs), ("kill", run.kill_refs)):
                for rank, ref in refs.items():
                    pending[ref] = (run, kind, rank)
        if not pending:
            return
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in ready:
            run, kind, rank = pending[ref]
            if run.exit_code is not None:
                continue
            try:
                value = ray.get(ref)
            except Exception as e:
                if run.warming:  # a placement group made ready for nobody: it just goes
                    logger.info("a slot made ready at start is given up: %s", e)
                    if run in self._warming:
                        self._warming.remove(run)
                        self._release(run.pg, run.actors)
                    continue
                self._failed_call(run, kind, rank, e)
                continue
            if kind == "ready":
                run.ready_ref = None
                if run.state == "pending":
                    try:
                        self._place(run)
                        if run.warming and self.fork_server:
                            run.actors[0].warm.remote()  # its fork server starts now, not with its first run
                    except Exception as e:
                        if run.warming:
                            logger.info("a slot made ready at start is given up: %s", e)
                            self._warming.remove(run)
                            self._release(run.pg, run.actors)
                            continue
                        logger.error("trial %s: could not start actors for run %s: %s", run.trial_id,
                                     run.allocation_id, e)
                        run.exit_codes[0] = 127
            elif kind == "where":
                run.where_refs.pop(rank, None)
                run.wheres[rank] = value
                if run.state == "placing" and not run.where_refs:
                    if run.warming:
                        self._warmed(run)
                    else:
                        self._start(run, run.wheres[0])
            elif kind == "start":
                del run.start_refs[rank]
                started = value if isinstance(value, dict) else {"pid": value, "not_isolated": None}
                if rank == 0:
                    run.pid = int(started["pid"])
                if started.get("not_isolated"):
                    node = run.rank_nodes[rank] if rank < len(run.rank_nodes) else "?"
                    self._log(run, rank, "stderr", f"[ray] run {run.allocation_id}: rank {rank} is not isolated on "
                              f"node {run.node_ips[rank] if rank < len(run.node_ips) else '?'}: "
                              f"{started['not_isolated']}", time.time())
                    self._say_not_isolated(node, run.node_ips[rank] if rank < len(run.node_ips) else "?",
                                           str(started["not_isolated"]))
            elif kind == "drain":
                lines, code = value
                for ts, stream, line in lines:
                    self._log(run, rank, stream, line, ts)
                if code is None:
                    run.drain_refs[rank] = self._watch(run.actors[rank].drain.remote(DRAIN_WAIT_S, run.allocation_id))
                else:
                    del run.drain_refs[rank]
                    run.exit_codes.setdefault(rank, int(code))
            elif kind == "kill":
                del run.kill_refs[rank]

    def _failed_call(self, run: RayRun, kind: str, rank: int, error: Exception) -> None:
        ray_errors = self._ray.exceptions
        for refs in (run.start_refs, run.drain_refs, run.kill_refs):
            refs.pop(rank, None)
        if kind == "ready":
            run.ready_ref = None
        if kind == "where":
            run.where_refs.clear()
        text = (str(error).strip().splitlines() or [error.__class__.__name__])[0]
        kept_actor_gone = run.reused and not run.killed and run.pid is None and (
            (kind == "where" and run.state == "placing")
            or (kind == "start" and not isinstance(error, ray_errors.RayTaskError)))
        if kept_actor_gone:
            # A kept actor died while it waited (its run asked where it is, or started without asking): this run
            # gets a new placement group, not a failure.
            logger.info("trial %s: the kept actors of run %s are gone (%s); it waits for a new placement group",
                        run.trial_id, run.allocation_id, text)
            self._release(run.pg, run.actors)
            run.actors, run.rank_nodes, run.node_ips, run.slots = [], [], [], []
            for refs in (run.start_refs, run.drain_refs, run.where_refs, run.kill_refs):
                refs.clear()  # calls to the dead actors: their failures are not this run's any more
            run.reused = False
            self._new_placement_group(run)
            return
        if kind == "start" and isinstance(error, ray_errors.RayTaskError):
            self._log(run, rank, "stderr", f"[ray] {text}", time.time())
            run.exit_codes.setdefault(rank, 127)
        else:  # RayActorError, ActorDiedError, ActorUnavailableError, a removed placement group...
            self._lost(run, rank, f"{error.__class__.__name__}: {text}")

    def _decide(self, run: RayRun) -> None:
        """Whether the run has ended, or must be stopped because one of its ranks failed."""
        now = time.monotonic()
        for rank, node in enumerate(run.rank_nodes):
            if node in self._dead:
                self._lost(run, rank, f"its Ray node {run.node_ips[rank]} ({node}) died")
        failed = [code for code in run.exit_codes.values() if code != 0]
        if run.state in ("storage", "pending", "placing") and (run.killed or failed):
            self._finish(run, failed[0] if failed else LOST_CODE)
            return
        if run.state not in ("running", "stopping"):
            return
        if len(run.exit_codes) == run.slots_needed:
            self._finish(run, failed[0] if failed else 0)
            return
        if run.exit_codes.get(0) == 0 and run.slots_needed > 1 and run.state == "running":
            run.chief_done_at = run.chief_done_at or now
            if now - run.chief_done_at > CHIEF_DONE_GRACE_S:
                self._stop(run)
        if failed and run.state == "running":
            self._stop(run)
        if run.state == "stopping" and run.term_deadline is not None and now > run.term_deadline:
            logger.warning("trial %s did not exit %.0f s after SIGTERM; SIGKILL", run.trial_id, TERM_GRACE_S)
            self._stop(run)
        if run.state == "stopping" and run.stop_deadline is not None and now > run.stop_deadline:
            for rank in range(run.slots_needed):
                self._lost(run, rank, "it did not report its exit after being killed")
            failed = [code for code in run.exit_codes.values() if code != 0]
            self._finish(run, failed[0] if failed else 0)

    def _stop(self, run: RayRun, signum: int = signal.SIGKILL) -> None:
        """Signal the process groups of the ranks that still run (SIGKILL; SIGTERM gets SIGKILL TERM_GRACE_S
        later); their exits come through the drains."""
        run.state = "stopping"
        grace = TERM_GRACE_S if signum == signal.SIGTERM else 0.0
        run.term_deadline = time.monotonic() + grace if grace else None
        run.stop_deadline = time.monotonic() + grace + STOP_GRACE_S
        for rank, actor in enumerate(run.actors):
            if rank not in run.exit_codes:
                run.kill_refs[rank] = actor.kill_group.remote(int(signum))

    def _release(self, pg: Any, actors: Sequence[Any]) -> None:
        """Kill the actors and remove the placement group."""
        for actor in actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                pass
        if pg is None:
            return
        try:
            self._remove_placement_group(pg)
        except Exception as e:
            logger.warning("could not remove the placement group %s: %s", getattr(pg, "id", pg), e)

    def _release_idle(self, *, expired_only: bool = False) -> None:
        now = time.monotonic()
        for pool in list(self._idle):
            if (not expired_only or now > pool.until
                    or any(node in self._dead or node in self._disabled for node in pool.rank_nodes)):
                self._idle.remove(pool)
                self._release(pool.pg, pool.actors)

    def _finish(self, run: RayRun, code: int) -> None:
        """Release (or keep for reuse) the run's actors and placement group; it is reported as exited with `code`."""
        reusable = (code == 0 and run.state == "running" and not run.killed and run.preempt_deadline is None
                    and len(run.exit_codes) == run.slots_needed and set(run.exit_codes.values()) == {0}
                    and not any(node in self._dead for node in run.rank_nodes))
        if reusable:
            self._idle.append(_IdlePool(run.pg, list(run.actors), list(run.rank_nodes), list(run.node_ips),
                                        list(run.slots), time.monotonic() + REUSE_S, dict(run.wheres), pool=run.pool))
        else:
            self._release(run.pg, run.actors)
        run.exit_code = code
        run.start_refs.clear()
        run.drain_refs.clear()
        run.kill_refs.clear()

    def poll_exited(self) -> List[Tuple[int, str, int]]:
        """Runs that ended, as (trial id, allocation id, exit code); their Ray resources are released."""
        self._refresh()
        self._collect()
        self._release_idle(expired_only=True)
        self._release_warming(expired_only=True)
        self._collect_storage_checks()
        exited = []
        for allocation_id, run in list(self._runs.items()):
            if run.state == "storage" and run.exit_code is None and not run.killed:
                waits_for = self._storage_wait(run)
                if waits_for == "":
                    self._take_slots(run)
                elif waits_for is None:
                    self._log(run, 0, "stderr", f"[ray] run {allocation_id} cannot start: "
                              f"{self._storage_bad[run.host_path or '']}", time.time())
                    run.exit_codes[0] = 127
            if run.exit_code is None:
                self._decide(run)
            if run.exit_code is not None:
                del self._runs[allocation_id]
                exited.append((run.trial_id, allocation_id, run.exit_code))
        return exited

    def preempt(self, allocation_id: str, timeout: float) -> None:
        """The run was asked (through the master's API) to checkpoint and exit; kill it after `timeout` s."""
        run = self._runs.get(allocation_id)
        if run is None or run.exit_code is not None:
            return
        if run.state in ("storage", "pending", "placing"):  # no trial process yet: nothing to checkpoint, it ends now
            self._finish(run, 0)
        elif run.preempt_deadline is None:
            run.preempt_deadline = time.monotonic() + timeout

    def enforce_deadlines(self) -> None:
        now = time.monotonic()
        for allocation_id, run in list(self._runs.items()):
            if run.preempt_deadline is not None and now > run.preempt_deadline and not run.killed:
                logger.warning("trial %s did not exit after preemption; killing it", run.trial_id)
                self.kill(allocation_id)

    def kill(self, allocation_id: str) -> None:
        """SIGKILL the run's process groups (a script's: SIGTERM first, SIGKILL TERM_GRACE_S later), through its
        actors; then its actors and placement group go."""
        run = self._runs.get(allocation_id)
        if run is not None:
            self._kill(run, signal.SIGTERM if run.script else signal.SIGKILL)

    def _kill(self, run: RayRun, signum: int) -> None:
        if run.killed or run.exit_code is not None:
            return
        run.killed = True
        if run.state == "running":
            self._stop(run, signum)
        else:
            self._decide(run)

    def kill_all(self) -> None:
        """SIGKILL every run (scripts too: the master is going away)."""
        self._release_idle()
        self._release_warming()
        for run in list(self._runs.values()):
            self._kill(run, signal.SIGKILL)

    # ------------------------------------------------------------ interactive tasks (rm/ray_tasks.py)

    counts_tasks = True  # the slots of the tasks it runs are in free_slots() (tasks/runner.py does not count them)

    def _live_tasks(self) -> List[ray_tasks.RayTask]:
        """The tasks not ended yet (ended ones are forgotten here)."""
        tasks = vars(self).setdefault("_tasks", {})  # (a manager made without __init__, a test's stand-in: none)
        for task_id, task in list(tasks.items()):
            if task.returncode is not None:
                tasks.pop(task_id, None)
        return list(tasks.values())

    def task_placement(self, slots: int, resource_pool: str) -> ray_tasks.TaskPlacement:
        """A task's one bundle (all its slots, on one node; a CPU-only task: a quarter of a slot's CPUs) and the
        label selector that keeps it on the enabled nodes of its pool."""
        self._refresh()
        pool = resource_pool if resource_pool in self._placements else ""
        placement = self._placements.get(pool)
        if slots > 0:
            bundle = {name: amount * slots for name, amount in ray_pools.bundle(self._bundle(), placement).items()}
        else:
            bundle = {"CPU": self.cpus_per_slot * ray_tasks.ZERO_SLOT_CPU_SHARE}
        nodes = sorted(n for n in self._pool_node_ids(pool) if n not in self._disabled)
        if nodes:
            selector: Optional[Dict[str, str]] = dict(placement.node_labels) if placement is not None else {}
            assert selector is not None
            selector[ray_pools.NODE_ID_LABEL] = f"in({', '.join(nodes)})"
        else:  # none now: it waits for one to join (not the other pools' nodes, as `_new_placement_group`)
            excluded = set(self._disabled)
            if placement is None and self._placements:
                excluded |= set(self._alive) - set(self._pool_node_ids(pool))
            selector = ray_pools.label_selector(placement, excluded)
        return ray_tasks.TaskPlacement(bundle, selector, pool, slots if self.slots.kind == "gpu" else 0)

    def task_master_url(self, master_url: str) -> str:
        """The master's URL as a task's process on a node reaches it."""
        return self._trial_url(master_url)

    def launch_task(self, task_id: str, *, slots: int, resource_pool: str, spec: Dict[str, Any],
                    keeper_dir: str, line_bytes: int, budget: int,
                    run: Optional[RunRequest] = None) -> ray_tasks.RayTask:
        """Place an interactive task on a node of its pool and start its process there (`RankWorker.start_task`
        runs `spec`); the handle (its log and exit files in `keeper_dir`, as a keeper's), which counts its slots
        here until it ended. `run`: its account and sandbox (a master with `run_as_users`)."""
        run_as = None
        if self.trial_user is not None:
            run_as = {"request": run or RunRequest(), "default": self.trial_user, **self._sandbox_paths}

        def node_dead(node_id: str) -> bool:
            self._refresh(force=True)
            return node_id in self._dead or node_id not in self._alive

        task = ray_tasks.RayTask(task_id, slots, self.task_placement(slots, resource_pool), spec, run_as, self._ray,
                                 self._worker_class, self._pg_strategy, self._placement_group, self._release,
                                 node_dead, keeper_dir=keeper_dir, line_bytes=line_bytes, budget=budget,
                                 on_change=self.exit_listener)
        self._tasks[task_id] = task
        logger.info("task %s waits for a placement group of %s %s slot(s) (resource pool %r)", task_id, slots,
                    self.slots.kind, task.pool)
        return task


def make_factory(**options: Any) -> Any:
    """A resource-manager factory for `Master(resource_manager=...)`: (work root, log sink) -> RayResourceManager."""
    def factory(work_root: str, log_sink: LogSink) -> RayResourceManager:
        return RayResourceManager(work_root, log_sink, **options)

    return factory
