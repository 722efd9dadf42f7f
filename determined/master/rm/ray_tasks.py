"""Interactive tasks on the Ray resource manager: a task is placed like a 1-container trial, its process runs there.

`RayResourceManager.launch_task` makes a placement group of one bundle that holds all the task's slots (STRICT_PACK:
one node), on the nodes of the task's resource pool that are enabled (rm/ray_pools.py), and a `RankWorker` actor in
it; a CPU-only task (0 slots) gets a bundle of a quarter of a slot's CPUs. The actor's `start_task` (rm/_ray_worker.py)
starts the task's process on that node, as the master would (its entry script, context, run-as account and
sandbox), and says on which node, and at which address its server listens. `RayTask` is the master's handle on it,
shaped like a local task's keeper (tasks/keeper.py): `poll()`, `wait()`, log files the task's lines are written to
as its actor's long poll brings them, `exit.json` when it ended, and `signal(signum)`, which signals the process
group on the node. One thread per task does the blocking Ray calls (the scheduler never waits for Ray). A master
that dies takes its actors with it (they are its own): a Ray task does not outlive the master.

A task whose actor or node dies ends with exit code 137 and `end_reason` naming the node; its slots are counted by
the resource manager (`free_slots`, `pool_usage`, `agents`) from its launch until its placement group is removed.
This module imports nothing from Ray at import time.
"""
import dataclasses
import json
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("determined.master")

DRAIN_WAIT_S = 1.0
PLACEMENT_POLL_S = 1.0  # how often a task waiting for its placement checks whether it was killed
ZERO_SLOT_CPU_SHARE = 0.25  # a CPU-only task's bundle: this share of a slot's CPUs (at most 4 per slot, as locally)
LOST_CODE = 137
STREAMS = ("stdout", "stderr")  # as tasks/keeper.py's log files
EXIT_FILE = "exit.json"


@dataclasses.dataclass
class TaskPlacement:
    """What a task asks of the cluster: its bundle, its label selector (None: any node) and its pool."""

    bundle: Dict[str, float]
    selector: Optional[Dict[str, str]]
    pool: str
    gpus: int


class RayTask:
    """The master's handle on one task running on a Ray node (see the module docstring), with the face of a local
    task's keeper (tasks/keeper.py `KeeperHandle`): `dir` holds `stdout.log` and `stderr.log` (`<unix time> <line>`
    per line; past `budget` bytes per stream lines are counted, not written) and, once it ended, `exit.json`
    (`exit_code`, `dropped`, `reason`), which the task runner reads as it reads a keeper's."""

    def __init__(self, task_id: str, slots: int, placement: TaskPlacement, spec: Dict[str, Any],
                 run_as: Optional[Dict[str, Any]], ray: Any, worker_class: Any, pg_strategy: Any,
                 placement_group: Callable[..., Any], release: Callable[[Any, List[Any]], None],
                 node_dead: Callable[[str], bool], *, keeper_dir: str, line_bytes: int, budget: int,
                 on_change: Optional[Callable[[], None]] = None) -> None:
        self.task_id = task_id
        self.slots = slots
        self.pool = placement.pool
        self.pid: Optional[int] = None  # no process of this machine: a restarted master finds nothing to adopt
        self.started: Optional[int] = None
        self.dir = keeper_dir
        self.remote_pid: Optional[int] = None  # its process on its node
        self.node_id: Optional[str] = None
        self.node_ip: Optional[str] = None
        self.host: Optional[str] = None
        self.port: Optional[int] = None
        self.returncode: Optional[int] = None
        self.end_reason: Optional[str] = None  # set when it ended for a reason of the cluster's (a node died)
        self._ray = ray
        self._spec = spec
        self._run_as = run_as
        self._worker_class = worker_class
        self._pg_strategy = pg_strategy
        self._release = release
        self._node_dead = node_dead
        self._on_change = on_change
        self._line_bytes = max(1, int(line_bytes))
        self._budget = int(budget)
        self._kept = {stream: 0 for stream in STREAMS}
        self._dropped = {stream: 0 for stream in STREAMS}
        self._killed: Optional[int] = None  # the signal asked for before the process started
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._actor: Any = None
        os.makedirs(keeper_dir, mode=0o700, exist_ok=True)
        self._logs = {stream: open(os.path.join(keeper_dir, f"{stream}.log"), "ab", buffering=0) for stream in STREAMS}
        options: Dict[str, Any] = {"bundle_label_selector": [placement.selector]} if placement.selector else {}
        self.pg = placement_group([placement.bundle], strategy="STRICT_PACK", name=f"det-task-{task_id}", **options)
        self._bundle = placement.bundle
        self._gpus = placement.gpus
        self._thread = threading.Thread(target=self._run, name=f"task-{task_id[:8]}-ray", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ a keeper's face

    def alive(self) -> bool:
        return self.returncode is None

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the task ended (at most `timeout` s); whether it did."""
        return self._done.wait(timeout)

    def signal(self, signum: int) -> None:
        """Signal the task's process group on its node; before it started, it will not start."""
        with self._lock:
            if self.returncode is not None:
                return
            actor = self._actor if self.remote_pid is not None else None
            if actor is None:
                self._killed = signum
        if actor is not None:
            try:
                actor.kill_group.remote(int(signum))
            except Exception as e:  # its actor is gone: its drain says so
                logger.info("task %s: cannot signal its process on Ray: %s", self.task_id, e)

    def kill_keeper(self) -> None:
        """Its actor does not answer: kill the actor (the task's process dies with it)."""
        with self._lock:
            actor, self._killed = self._actor, self._killed or 9
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:
                pass

    def address(self) -> Optional[Tuple[str, int]]:
        """(host, port) where its server listens, once it started (None before, and for a command)."""
        if self.port and self.host and self.returncode is None:
            return self.host, self.port
        return None

    # ------------------------------------------------------------ the task's thread

    def _write(self, stream: str, text: str, ts: Optional[float] = None) -> None:
        line = text[:self._line_bytes]
        self._kept[stream] += len(line)
        if self._kept[stream] > self._budget:
            self._dropped[stream] += 1
            return
        try:
            self._logs[stream].write(f"{ts or time.time():.6f} {line}\n".encode("utf-8", errors="replace"))
        except OSError:
            pass

    def _run(self) -> None:
        code = LOST_CODE
        try:
            code = self._place_and_follow()
        except Exception as e:  # a Ray error the steps below did not expect: the task ends with it
            text = (str(e).strip().splitlines() or [e.__class__.__name__])[0]
            self._write("stderr", f"[ray] task {self.task_id}: {text}")
            self.end_reason = self.end_reason or f"the task failed on Ray: {text}"
        finally:
            self._release(self.pg, [self._actor] if self._actor is not None else [])
            for f in self._logs.values():
                f.close()
            _write_exit(self.dir, code, self._dropped, self.end_reason)
            with self._lock:
                self.returncode = code
            self._done.set()
            if self._on_change is not None:
                self._on_change()

    def _place_and_follow(self) -> int:
        ray = self._ray
        ready = self.pg.ready()
        said = False
        while True:
            done, _ = ray.wait([ready], timeout=PLACEMENT_POLL_S)
            if self._killed is not None:  # killed while it waited: it never started
                return -self._killed
            if done:
                ray.get(ready)
                break
            if not said:
                said = True
                self._write("stdout", f"[ray] task {self.task_id} waits for {self.slots} slot(s) on a Ray node of "
                                      f"resource pool {self.pool!r}")
        with self._lock:
            self._actor = self._worker_class.options(
                num_cpus=self._bundle.get("CPU", 0.0), num_gpus=self._gpus, max_concurrency=4, max_restarts=0,
                scheduling_strategy=self._pg_strategy(placement_group=self.pg, placement_group_bundle_index=0),
            ).remote()
        try:
            started = ray.get(self._actor.start_task.remote(self._spec, self._run_as))
        except ray.exceptions.RayTaskError as e:
            text = (str(e).strip().splitlines() or ["RayTaskError"])[-1]
            self._write("stderr", f"[ray] task {self.task_id} could not start on its Ray node: {text}")
            return 127
        except Exception as e:
            return self._lost(e)
        with self._lock:
            self.node_id, self.node_ip = str(started["node_id"]), str(started["ip"])
            self.host, self.port = str(started["host"]), int(started["port"]) or None
            self.remote_pid = int(started["pid"])
            killed = self._killed
        listening = f", listening on {self.host}:{self.port}" if self.port else ""
        self._write("stdout", f"[ray] task {self.task_id} on Ray node {self.node_ip} (node id {self.node_id}), "
                              f"pid {self.remote_pid}{listening}")
        if started.get("not_isolated"):
            self._write("stderr", f"[ray] task {self.task_id} is not isolated on node {self.node_ip}: "
                                  f"{started['not_isolated']}")
        if killed is not None:
            self._actor.kill_group.remote(int(killed))
        if self._on_change is not None:
            self._on_change()
        while True:
            try:
                lines, code = ray.get(self._actor.drain.remote(DRAIN_WAIT_S, self.task_id))
            except Exception as e:
                return self._lost(e)
            for ts, stream, text in lines:
                self._write("stdout" if stream == "stdout" else "stderr", text, ts)
            if code is not None:
                return int(code)

    def _lost(self, error: Exception) -> int:
        """Its actor died (its node, most often): exit code 137 and a reason naming the node."""
        if self._killed is not None and self.node_id is None:
            return -self._killed
        node = self.node_id or "?"
        deadline = time.monotonic() + 30.0  # Ray marks a dead node after its missed health checks
        while self.node_id is not None and not self._node_dead(node) and time.monotonic() < deadline:
            time.sleep(1.0)
        ip = self.node_ip or "?"
        if self.node_id is not None and self._node_dead(node):
            self.end_reason = f"its Ray node {ip} (node id {node}) died"
        else:
            text = (str(error).strip().splitlines() or [error.__class__.__name__])[0]
            self.end_reason = f"its Ray actor on node {ip} (node id {node}) was lost: {text}"
        self._write("stderr", f"[ray] task {self.task_id}: {self.end_reason}")
        return LOST_CODE


def _write_exit(keeper_dir: str, code: Optional[int], dropped: Dict[str, int], reason: Optional[str]) -> None:
    """exit.json as a keeper writes it (atomically), with the reason of an end the cluster caused."""
    path = os.path.join(keeper_dir, EXIT_FILE)
    try:
        with open(path + ".tmp", "w") as f:
            json.dump({"exit_code": code, "dropped": dropped, "error": "", "reason": reason}, f)
        os.replace(path + ".tmp", path)
    except OSError as e:
        logger.warning("cannot write %s: %s", path, e)
