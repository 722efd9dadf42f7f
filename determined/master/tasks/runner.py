"""Runs interactive tasks: starts their processes on free slots, captures their output as task logs, follows a
notebook's or TensorBoard's readiness and idleness, kills them, and records how each ended.

It lives beside the resource manager: the master's scheduler thread calls `tick()` before it schedules trials, so
a queued task takes free slots first (tasks are never preempted, as in Determined), and the slots it holds are
marked used in the local resource manager itself, so trials wait for them and never get the same slot ids.
Each task's process is started by a keeper of its own (tasks/keeper.py, `_start_process`), in a session of its own,
which outlives the master: its output goes to log files that the runner tails into the task's logs from offsets it
stores with the lines, and its exit code to a file. A master that stops kills its tasks; a master that died leaves
them running, and the next one finds them again (`recover`): it holds their slots before any trial is scheduled and
proxies to them again. A task runs in a run directory of its own, from the resource manager's environment
allow-list; on a server with run-as accounts (`det master up --trial-user`, issue 33) a task runs as its owner's
linked account, in a bubblewrap sandbox of its own (rm/sandbox.py, as a trial's, with every storage root empty) when
the server can make one.
"""
import dataclasses
import datetime
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from sqlalchemy import select

from determined.master.db import User, utcnow
from determined.master.db.models import Task
from determined.master.rm.log_lines import DEFAULT_LINE_BYTES
from determined.master.rm.trial_env import inherited_environment, trial_environment
from determined.master.tasks import keeper, notebook, records, states

logger = logging.getLogger("determined.master")

TERM_GRACE_S = 5.0  # a killed task gets SIGTERM, then SIGKILL this much later
DEFAULT_POLL_S = 5.0  # how often a notebook's or TensorBoard's readiness and idleness are read
TENSORBOARD_TIMEOUT_S = 300.0  # Determined's master `tensorboard_timeout`
DEFAULT_TASK_LOG_BYTES = 256 * 2**20  # a task's logs when the master has no log limits
ACTIVITY_STEP_S = 5.0  # a server task's stored last_activity follows its use to within this
TAIL_CHUNK_BYTES = 4 * 2**20  # the most of one log file one tick stores
ENTRY_SCRIPT = """\
# The entrypoint of a task: its context's startup-hook.sh first (sourced, as Determined does), then the task.
if [ -f ./startup-hook.sh ]; then
  . ./startup-hook.sh || { echo "startup-hook.sh failed with exit code $?" >&2; exit 1; }
fi
if [ "$#" -eq 1 ]; then exec /bin/sh -c "$1"; fi
exec "$@"
"""


@dataclasses.dataclass
class TaskProcess:
    task_id: str
    task_type: str
    popen: keeper.KeeperHandle  # its keeper (Popen-like: pid, poll(), wait())
    slot_ids: List[int]
    run_dir: str
    offsets: Dict[str, int] = dataclasses.field(default_factory=dict)  # stored bytes of each stream's log file
    port: Optional[int] = None
    secret: Optional[str] = None
    idle_type: str = "kernels_or_terminals"
    ready: bool = False
    polls: int = 0  # how many times the watcher read its activity
    running_recorded: bool = False  # its RUNNING state is stored
    recorded_activity: Optional[datetime.datetime] = None  # the last_activity stored
    idle_timeout: Optional[float] = None  # seconds (None: never killed for idleness)
    active_at: Optional[datetime.datetime] = None  # the last time the watcher saw it in use
    idle_reason: Optional[str] = None  # set when the runner kills it for idleness
    term_deadline: Optional[float] = None
    sandboxed: bool = False
    token_hash: str = ""  # the hash of the owner's token the task acts with: revoked when it ends
    exited: bool = False  # its keeper ended (set by the thread that waits for it: the proxy reads no process)
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)


class TaskRunner:
    """The interactive tasks of one master (see the module docstring). `poll_s`: how often a server task's
    readiness and idleness are read; `notebook_timeout`: the master's `notebook_timeout` in seconds (None: off)."""

    def __init__(self, master: Any, *, notebook_timeout: Optional[float] = None,
                 poll_s: float = DEFAULT_POLL_S) -> None:
        self.master = master
        self.notebook_timeout = notebook_timeout
        self.tensorboard_timeout = TENSORBOARD_TIMEOUT_S
        self.poll_s = poll_s
        self._procs: Dict[str, TaskProcess] = {}
        self._own_used: set = set()  # slot ids held by tasks, for a resource manager without `_used`
        self.ticks = 0  # ticks run (tests wait for ticks, not for time)

    # ------------------------------------------------------------ slots

    def _rm_used(self) -> Optional[set]:
        used = getattr(self.master.rm, "_used", None)
        return used if isinstance(used, set) else None

    def _free_slot_ids(self) -> List[int]:
        rm = self.master.rm
        own_ids = getattr(rm, "free_slot_ids", None)
        if callable(own_ids):  # the local resource manager: not held (tasks add theirs to it), not disabled
            return list(own_ids())
        total = int(rm.total_slots or 0)
        used = self._rm_used()
        taken = used if used is not None else self._own_used
        free = [i for i in range(total) if i not in taken]
        if used is None:  # another resource manager: what it says is free, less what tasks hold
            # (one that places tasks itself counts their slots in free_slots(): rm/ray.py)
            free = free[:max(0, rm.free_slots() - (0 if getattr(rm, "counts_tasks", False) else len(self._own_used)))]
        return free

    def _hold(self, ids: List[int]) -> None:
        used = self._rm_used()
        (used if used is not None else self._own_used).update(ids)

    def _release(self, ids: List[int]) -> None:
        used = self._rm_used()
        (used if used is not None else self._own_used).difference_update(ids)

    def held_slots(self) -> int:
        return sum(len(p.slot_ids) for p in self._procs.values())

    def running(self) -> Dict[str, TaskProcess]:
        return dict(self._procs)

    # ------------------------------------------------------------ the tick

    def recover(self) -> int:
        """At the master's start, before any trial is scheduled: each task recorded as running whose keeper still
        runs is followed again (its slots held, its logs tailed from the stored offsets, its server proxied, a
        notebook's idleness read); one whose keeper is gone is recorded as ended, with why. Queued tasks stay
        queued. Returns how many were recorded as ended."""
        ended, adopted = 0, []
        with self.master.write(wake=False) as s:
            for task in s.scalars(select(Task).where(Task.state.in_(states.HOLDING))):
                run_dir = task.run_dir or os.path.join(str(self.master.data_dir), "work", "tasks", task.id)
                handle = keeper.KeeperHandle.adopt(task.pid, task.pid_start, _keeper_dir(run_dir))
                proc = TaskProcess(task.id, task.task_type, handle or keeper.KeeperHandle(
                    task.pid or 0, -1, _keeper_dir(run_dir)), list(task.slot_ids or []), run_dir,
                    offsets=dict(task.log_offsets or {}), port=task.port, secret=task.service_secret,
                    idle_type=str((task.config or {}).get("notebook_idle_type") or "kernels_or_terminals"),
                    token_hash=task.token_hash or "")
                if handle is None:
                    self._tail(s, proc, final=True)
                    self._end_gone(s, task, proc)
                    ended += 1
                    continue
                proc.running_recorded = task.state == states.RUNNING
                proc.recorded_activity = proc.active_at = task.last_activity
                proc.idle_timeout = self._idle_timeout(task) if proc.running_recorded else None
                self._procs[task.id] = proc
                self._hold(proc.slot_ids)  # before the first trial is scheduled: no slot is given twice
                records.add_log(s, task.id, records.MASTER_STREAM,
                                f"found again by a restarted master (keeper pid {handle.pid}), on "
                                f"{len(proc.slot_ids)} slot(s) {proc.slot_ids}")
                adopted.append(proc)
        for proc in adopted:
            logger.info("task %s: found again (keeper pid %s)", proc.task_id, proc.popen.pid)
            self._follow_process(proc)
        self._stop_unrecorded()
        return ended

    def _stop_unrecorded(self) -> None:
        """Keepers no task records (their master died between starting one and storing it; the task is still
        QUEUED and starts again): ended with their tasks, their files removed."""
        root = os.path.join(str(self.master.data_dir), "work", "tasks")
        try:
            names = [n for n in os.listdir(root) if n.endswith(".keeper")]
        except OSError:
            return
        followed = {os.path.abspath(p.popen.dir) for p in self._procs.values()}
        for name in names:
            path = os.path.abspath(os.path.join(root, name))
            if path not in followed and keeper.stop_unrecorded(path):
                logger.warning("task %s: a keeper no task records was running; it was stopped",
                               name[:-len(".keeper")])

    def _end_gone(self, s: Any, task: Task, proc: TaskProcess) -> None:
        """A task whose keeper ended while no master ran: its exit file says how, else the keeper was killed."""
        found = keeper.read_exit(proc.popen.dir) or {}
        code = found.get("exit_code") if isinstance(found.get("exit_code"), int) else None
        if not found:
            keeper.kill_leftovers(proc.popen.dir, task.id)
        if task.kill_requested:
            reason = task.end_reason or "killed"
        elif code is None and task.pid is None:  # started on a Ray node (rm/ray_tasks.py): no keeper of ours
            reason = ("the task ran on a Ray node through the master's Ray driver, which ended with the master; a "
                      "task on Ray is not found again after a restart (a trial is, from its checkpoint); start it "
                      "again")
        elif code is None:
            reason = ("the task's keeper process ended while the master was down (killed, or the machine "
                      "restarted), and the task with it; start it again")
        elif code == 0:
            reason = "the task's process exited successfully while the master was down"
        else:
            reason = (f"the task's process failed with exit code {code} while the master was down" if code > 0 else
                      f"the task's process was ended by signal {-code} while the master was down")
        self._note_dropped(s, task.id, found)
        _revoke(s, proc)
        records.end(s, task, code, reason)
        self._clean(proc)
        logger.info("task %s ended while the master was down: %s", task.id, reason)

    def tick(self) -> None:
        """One step, from the master's scheduler thread: logs, ends, kills, readiness and idleness, starts."""
        self.ticks += 1
        self._record_exits()
        self._flush_logs()
        self._follow()
        self._start_queued()
        self._flush_logs()

    def _flush_logs(self) -> None:
        """Store the lines the keepers wrote since the last look, with the new offsets, in one transaction: a
        master that dies between two looks neither loses nor repeats a line."""
        grown = [p for p in self._procs.values() if any(
            _size(keeper.log_path(p.popen.dir, stream)) > p.offsets.get(stream, 0) for stream in keeper.STREAMS)]
        if not grown:
            return
        with self.master.write(wake=False) as s:
            for proc in grown:
                self._tail(s, proc)

    def _tail(self, s: Any, proc: TaskProcess, final: bool = False) -> None:
        """Add the complete lines of the task's log files past its offsets (all that is left when `final`), and
        store the offsets in the same transaction."""
        offsets = dict(proc.offsets)
        for stream in keeper.STREAMS:
            offset = int(proc.offsets.get(stream, 0))
            while True:
                try:
                    with open(keeper.log_path(proc.popen.dir, stream), "rb") as f:
                        f.seek(offset)
                        chunk = f.read(TAIL_CHUNK_BYTES)
                except OSError:
                    break
                end = len(chunk) if final and len(chunk) < TAIL_CHUNK_BYTES else chunk.rfind(b"\n") + 1
                if end <= 0:
                    break
                lines = []
                for raw in chunk[:end].split(b"\n"):
                    if not raw:
                        continue
                    stamp, _, text = raw.decode("utf-8", errors="replace").partition(" ")
                    try:
                        at = datetime.datetime.fromtimestamp(float(stamp), datetime.timezone.utc).replace(tzinfo=None)
                    except (ValueError, OverflowError):
                        at, text = utcnow(), f"{stamp} {text}"
                    lines.append((proc.task_id, at, stream, text))
                records.add_logs(s, lines)
                offset += end
                offsets[stream] = offset
                if not final:
                    break  # the rest at the next tick: one tick stores a bounded amount
        if offsets != proc.offsets:
            task = s.get(Task, proc.task_id)
            if task is not None:
                task.log_offsets = offsets
            proc.offsets = offsets

    def _record_exits(self) -> None:
        ended = [(tid, p) for tid, p in list(self._procs.items()) if p.popen.poll() is not None]
        if not ended:
            return
        with self.master.write(wake=False) as s:
            for task_id, proc in ended:
                self._tail(s, proc, final=True)
                found = keeper.read_exit(proc.popen.dir) or {}
                code = found.get("exit_code") if isinstance(found.get("exit_code"), int) else None
                if not found:
                    keeper.kill_leftovers(proc.popen.dir, task_id)
                proc.stop.set()
                del self._procs[task_id]
                self._release(proc.slot_ids)
                self._note_dropped(s, task_id, found)
                self._clean(proc)
                _revoke(s, proc)
                task = s.get(Task, task_id)
                if task is None:
                    continue
                if proc.idle_reason:
                    reason = proc.idle_reason
                elif task.kill_requested:
                    reason = task.end_reason or "killed"
                elif found.get("reason"):  # a Ray task's node died (rm/ray_tasks.py)
                    reason = str(found["reason"])
                elif code is None:
                    reason = "the task's keeper process was killed, and the task with it"
                elif code == 0:
                    reason = "the task's process exited successfully"
                else:
                    reason = f"the task's process failed with exit code {code}" if code > 0 else \
                        f"the task's process was ended by signal {-code}"
                records.end(s, task, code, reason)
                logger.info("task %s ended: %s (exit code %s)", task_id, reason, code)

    def _note_dropped(self, s: Any, task_id: str, found: Dict[str, Any]) -> None:
        """The master's line on what the keeper read past the log budget and did not keep."""
        dropped = found.get("dropped") if isinstance(found.get("dropped"), dict) else {}
        budget = self._log_budget() // 2
        for stream in keeper.STREAMS:
            count = dropped.get(stream)
            if isinstance(count, int) and count > 0:
                records.add_log(s, task_id, records.MASTER_STREAM,
                                f"{count} later line(s) of {stream} were not kept: the task's logs are limited to "
                                f"{budget} bytes per stream (trial_log_max_bytes / 2)")

    def _clean(self, proc: TaskProcess) -> None:
        shutil.rmtree(proc.run_dir, ignore_errors=True)
        shutil.rmtree(proc.popen.dir, ignore_errors=True)

    def _follow(self) -> None:
        """Kill what was asked to end, move started servers to RUNNING, kill idle notebooks and TensorBoards."""
        if not self._procs:
            return
        now = utcnow()
        with self.master.read() as s:
            kills = set(s.scalars(select(Task.id).where(Task.kill_requested.is_(True),
                                                        Task.state == states.TERMINATING)))
        for task_id in kills:
            proc = self._procs.get(task_id)
            if proc is not None and proc.term_deadline is None:
                proc.term_deadline = time.monotonic() + TERM_GRACE_S
                self._kill_group(proc, signal.SIGTERM)
        for proc in self._procs.values():
            if proc.term_deadline is not None and time.monotonic() > proc.term_deadline:
                self._kill_group(proc, signal.SIGKILL)
        # In memory first: a write only when a server became ready, moved its activity on by ACTIVITY_STEP_S, or
        # has been idle for its timeout (a tick of a running notebook costs no write).
        changes: List[str] = []
        for task_id, proc in self._procs.items():
            if proc.term_deadline is not None or task_id in kills or not proc.ready:
                continue
            if not proc.running_recorded:
                changes.append(task_id)
                continue
            active = proc.active_at or now
            recorded = proc.recorded_activity or active
            if (active - recorded).total_seconds() >= ACTIVITY_STEP_S or (
                    proc.idle_timeout is not None and (now - active).total_seconds() > proc.idle_timeout):
                changes.append(task_id)
        if not changes:
            return
        with self.master.write(wake=False) as s:
            for task_id in changes:
                task = s.get(Task, task_id)
                proc = self._procs[task_id]
                if task is None or task.state not in (states.STARTING, states.RUNNING):
                    continue
                active_at = proc.active_at
                if task.state == states.STARTING:
                    task.state = states.RUNNING
                    task.last_activity = active_at or now
                    where = (f"at {records.service_address(task)}" if task.task_type != states.SHELL
                             else f"for `det shell open {task_id}`")
                    records.add_log(s, task_id, records.MASTER_STREAM, f"{states.NAMES[task.task_type]} is ready {where}")
                    proc.idle_timeout = self._idle_timeout(task)
                    proc.running_recorded = True
                elif active_at is not None and (task.last_activity is None or active_at > task.last_activity):
                    task.last_activity = active_at
                proc.recorded_activity = task.last_activity
                timeout = proc.idle_timeout
                if timeout is not None and task.last_activity is not None and \
                        (now - task.last_activity).total_seconds() > timeout:
                    reason = f"idle for more than {_duration(timeout)} (idle_timeout), killed by the master"
                    proc.idle_reason = reason
                    task.kill_requested = True
                    task.state = states.TERMINATING
                    task.end_reason = reason
                    records.add_log(s, task_id, records.MASTER_STREAM, reason)
                    proc.term_deadline = time.monotonic() + TERM_GRACE_S
                    self._kill_group(proc, signal.SIGTERM)

    def _idle_timeout(self, task: Task) -> Optional[float]:
        """Notebooks' and TensorBoards' (shells and commands run until they end or are killed)."""
        if task.task_type not in (states.NOTEBOOK, states.TENSORBOARD):
            return None
        own = (task.config or {}).get("idle_timeout")
        if own is not None:
            from determined.master.tasks.config import parse_duration

            return parse_duration(own, "idle_timeout")
        if task.task_type == states.NOTEBOOK:
            return self.notebook_timeout
        if task.task_type == states.TENSORBOARD:
            return self.tensorboard_timeout
        return None

    def _start_queued(self) -> None:
        pools = getattr(self.master, "pools", None)
        default_priority = pools.pool_for("").scheduler.default_priority if pools is not None else 42
        with self.master.read() as s:
            rows = s.execute(select(Task.id, Task.slots, Task.priority, Task.registered_time)
                             .where(Task.state == states.QUEUED)).all()
        if not rows:
            return
        queued = sorted(rows, key=lambda t: (t.priority if t.priority is not None else default_priority,
                                             t.registered_time, t.id))
        zero_room = max(1, int(self.master.rm.total_slots or 0)) * 4 - sum(
            1 for p in self._procs.values() if not p.slot_ids)
        agent = getattr(self.master.rm, "agent", None)
        if agent is not None and not getattr(agent, "enabled", True):
            zero_room = 0  # a disabled local agent (`det agent disable`) starts no task, CPU-only ones included
        for task in queued:
            free = self._free_slot_ids()
            if task.slots > len(free) or (task.slots == 0 and zero_room <= 0):
                continue  # a later, smaller task may fit
            if task.slots == 0:
                zero_room -= 1
            self._launch(task.id, free[:task.slots])

    # ------------------------------------------------------------ starting a task

    def _launch(self, task_id: str, slot_ids: List[int]) -> None:
        with self.master.write(wake=False) as s:
            task = s.get(Task, task_id)
            if task is None or task.state != states.QUEUED:
                return
            try:
                proc = self._spawn(s, task, slot_ids)
            except Exception as e:  # a task that cannot start ends with the reason; the master goes on
                logger.warning("task %s could not start: %s", task_id, e)
                records.end(s, task, None, f"the task could not start: {e}")
                return
            self._procs[task_id] = proc
            self._hold(slot_ids)
            task.state = states.RUNNING if task.task_type == states.COMMAND else states.STARTING
            task.start_time = utcnow()
            task.slot_ids = slot_ids
            task.pid, task.pid_start = proc.popen.pid, proc.popen.started
            task.run_dir = proc.run_dir
            task.log_offsets = {}
            task.token_hash = proc.token_hash or None
            task.port = proc.port
            task.host = "127.0.0.1" if proc.port else None
            records.add_log(s, task_id, records.MASTER_STREAM,
                            f"started (pid {proc.popen.pid}, its keeper) on {len(slot_ids)} slot(s) {slot_ids}")
        self._follow_process(proc)

    def _follow_process(self, proc: TaskProcess) -> None:
        """Threads that wake the master when the task's keeper ends and read a server's readiness and idleness."""
        threading.Thread(target=self._wait, args=(proc,), name=f"task-{proc.task_id[:8]}-wait",
                         daemon=True).start()
        if proc.task_type != states.COMMAND:
            threading.Thread(target=self._watch_server, args=(proc,), name=f"task-{proc.task_id[:8]}-watch",
                             daemon=True).start()

    def _spawn(self, s: Any, task: Task, slot_ids: List[int]) -> TaskProcess:
        from determined.master.security import auth

        rm = self.master.rm
        run_dir = os.path.join(str(self.master.data_dir), "work", "tasks", task.id)
        os.makedirs(run_dir, exist_ok=True)
        owner = s.get(User, task.owner_id) if task.owner_id is not None else None
        account, sandbox = self._account(owner)
        if task.context:
            import base64

            from determined.exec._model_def import extract_model_def

            extract_model_def(base64.b64encode(task.context).decode("ascii"), run_dir)
        entry = os.path.join(run_dir, ".det-task-entry.sh")
        with open(entry, "w") as f:
            f.write(ENTRY_SCRIPT)
        work_dir = (task.config or {}).get("work_dir") or run_dir
        env = self._environment(account)
        env.update(_config_env(task.config))
        token = ""
        if owner is not None:  # the task acts as its owner, and nobody else: `det` and the SDK inside it
            token, _ = auth.issue_token(s, owner)
        gpus = getattr(getattr(rm, "slots", None), "gpus", None) or []
        env.update({
            "DET_MASTER": str(self.master.url or ""),
            "DET_TASK_ID": task.id,
            "DET_TASK_TYPE": task.task_type,
            "DET_USER": task.owner,
            "DET_USER_TOKEN": token,
            "DET_SESSION_TOKEN": token,
            "DET_WORKDIR": work_dir,
            "DET_SLOT_IDS": "[" + ",".join(map(str, slot_ids)) + "]",
            "CUDA_VISIBLE_DEVICES": ",".join(gpus[i] for i in slot_ids if i < len(gpus)),
        })
        from determined.master.tasks import remote

        if remote.runs_on_ray(rm, task.task_type):  # placed on a node of the Ray cluster, started there
            handle = remote.launch(rm, task, env, entry_script=ENTRY_SCRIPT, master_url=str(self.master.url or ""),
                                   account_link=_link(owner), keeper_dir=_keeper_dir(run_dir),
                                   line_bytes=getattr(rm, "line_bytes", DEFAULT_LINE_BYTES),
                                   budget=self._log_budget() // 2)
            return TaskProcess(task.id, task.task_type, handle, list(slot_ids), run_dir, secret=task.service_secret,
                               idle_type=str(task.config.get("notebook_idle_type") or "kernels_or_terminals"),
                               sandboxed=account is not None, token_hash=auth.hash_token(token) if token else "")
        port: Optional[int] = None
        if task.task_type == states.COMMAND:
            program = list(task.config.get("entrypoint") or [])
        elif task.task_type == states.SHELL:
            port = _free_port()
            host_key, authorized = os.path.join(run_dir, ".ssh-host-key"), os.path.join(run_dir, ".ssh-authorized-key")
            with open(host_key, "w", opener=lambda path, flags: os.open(path, flags, 0o600)) as f:
                f.write(records.ssh_key_pair()[0])
            with open(authorized, "w") as f:
                f.write(str(task.ssh_public_key) + "\n")
            program = [sys.executable, "-m", "determined.master.tasks.shell_server", "--port", str(port),
                       "--host-key", host_key, "--authorized-key", authorized]
        else:
            port = _free_port()
            env["JUPYTER_RUNTIME_DIR"] = os.path.join(run_dir, ".jupyter-runtime")
            env["JUPYTER_CONFIG_DIR"] = os.path.join(run_dir, ".jupyter")
            if task.task_type == states.NOTEBOOK:
                env["NOTEBOOK_PORT"] = str(port)
                env["NOTEBOOK_IDLE_TYPE"] = str(task.config.get("notebook_idle_type") or "kernels_or_terminals")
                program = notebook.jupyter_command(sys.executable, port=port, base_url=f"/proxy/{task.id}/",
                                                   token=str(task.service_secret), root_dir=work_dir,
                                                   allow_root=account is None and os.geteuid() == 0)
            else:
                from determined.master.tasks import tensorboard as tb

                env["TENSORBOARD_PORT"] = str(port)
                logdir = tb.prepare_logdir(s, self.master, task, run_dir)
                program = tb.tensorboard_command(sys.executable, port=port, path_prefix=f"/proxy/{task.id}",
                                                 logdir=logdir, extra=task.config.get("tensorboard_args") or [])
        command = ["/bin/sh", entry, *program]
        popen_kwargs: Dict[str, Any] = {}
        if account is not None:
            os.chown(run_dir, account.uid, account.gid)
            for root, dirs, files in os.walk(run_dir):
                for name in dirs + files:
                    os.lchown(os.path.join(root, name), account.uid, account.gid)
            os.chmod(run_dir, 0o700)
            if sandbox is not None:
                from determined.master.rm.sandbox import RunRequest

                command = sandbox.argv(command, run_dir=run_dir, home=env.get("HOME", ""), account=account,
                                       request=RunRequest(account=_link(owner),
                                                          bind_mounts=tuple(task.config.get("bind_mounts") or ())),
                                       cwd=work_dir)  # bind_mounts: as a trial's (checked at submit)
                popen_kwargs = {"umask": 0o022}  # bwrap starts as root; setpriv inside takes the account
            else:
                popen_kwargs = {**account.popen_kwargs(), "umask": 0o077}
        spec = {"argv": command, "env": env, "dir": _keeper_dir(run_dir),
                "cwd": work_dir if task.config.get("work_dir") and sandbox is None else run_dir,
                "user": popen_kwargs.get("user"), "group": popen_kwargs.get("group"),
                "extra_groups": popen_kwargs.get("extra_groups"), "umask": popen_kwargs.get("umask"),
                "line_bytes": getattr(rm, "line_bytes", DEFAULT_LINE_BYTES), "budget": self._log_budget() // 2}
        handle = self._start_process(spec)
        return TaskProcess(task.id, task.task_type, handle, list(slot_ids), run_dir, port=port,
                           secret=task.service_secret, idle_type=str(task.config.get("notebook_idle_type")
                                                                      or "kernels_or_terminals"),
                           sandboxed=sandbox is not None, token_hash=auth.hash_token(token) if token else "")

    def _start_process(self, spec: Dict[str, Any]) -> keeper.KeeperHandle:
        """Start the task's keeper (tasks/keeper.py) with `spec`: the task's command (`argv`, already wrapped in its
        sandbox), `env`, `cwd`, account, and where its log and exit files go (`dir`). Raises with the reason when
        the command cannot start. Another place to run tasks returns a handle with the same face as
        keeper.KeeperHandle: `pid`, `started`, `dir` (the log and exit files), `poll()`, `wait(timeout) -> bool`,
        `signal(SIGTERM | SIGKILL)`, `kill_keeper()`."""
        return keeper.start(spec)

    def _account(self, owner: Optional[User]) -> Tuple[Any, Any]:
        """The OS account the owner's tasks run as and the sandbox, on a server with run-as accounts; else None."""
        rm = self.master.rm
        default = getattr(rm, "trial_user", None)
        if default is None:
            return None, None
        from determined.master.rm.sandbox import account_of

        account = account_of(_link(owner), default)
        return account, getattr(rm, "sandbox", None)

    def _environment(self, account: Any) -> Dict[str, str]:
        rm = self.master.rm
        if hasattr(rm, "base_env"):
            return dict(rm.base_env(account))
        if getattr(rm, "inherit_environment", False):
            return inherited_environment(os.environ)
        return trial_environment(os.environ)

    def _wait(self, proc: TaskProcess) -> None:
        try:
            proc.popen.wait()
        finally:
            proc.exited = True
            self.master.wake()

    def _log_budget(self) -> int:
        """The bytes of logs one task may keep: the master's trial_log_max_bytes (logs.LogLimits)."""
        writer = getattr(self.master, "log_writer", None)
        limits = getattr(writer, "limits", None)
        return int(getattr(limits, "trial_bytes", DEFAULT_TASK_LOG_BYTES) or DEFAULT_TASK_LOG_BYTES)

    def _watch_server(self, proc: TaskProcess) -> None:
        """Reads the server's readiness, then (notebooks) its idleness from Jupyter's own API, every `poll_s`."""
        previous: Optional[Any] = None
        while not proc.stop.is_set() and proc.popen.poll() is None:
            if not proc.ready:
                port, host = _address(proc)
                if notebook.answers(port, f"/proxy/{proc.task_id}/", proc.secret, proc.task_type, host):
                    proc.ready = True
                    proc.active_at = utcnow()
                    self.master.wake()
                proc.stop.wait(min(self.poll_s, 0.2))
                continue
            if proc.task_type == states.NOTEBOOK:
                port, host = _address(proc)
                state = notebook.read_activity(port, f"/proxy/{proc.task_id}/", proc.secret or "", host)
                if state is not None:
                    busy, marker = notebook.in_use(state, proc.idle_type, previous)
                    previous = marker
                    if busy:
                        proc.active_at = utcnow()
                proc.polls += 1
            self.master.wake()
            proc.stop.wait(self.poll_s)

    def polls_of(self, task_id: str) -> int:
        proc = self._procs.get(task_id)
        return proc.polls if proc is not None else -1

    def note_proxy_activity(self, task_id: str) -> None:
        """A request went through the proxy to a TensorBoard: it is in use (notebooks are read from Jupyter)."""
        proc = self._procs.get(task_id)
        if proc is not None and proc.task_type == states.TENSORBOARD:
            proc.active_at = utcnow()

    def endpoint(self, task_id: str) -> Optional[Tuple[int, Optional[str], str, str]]:
        """(port, secret, task type, host) of a running server task of this master, or None. `host`: 127.0.0.1,
        or the IP of the Ray node it runs on."""
        proc = self._procs.get(task_id)
        if proc is None or proc.exited:  # read on every proxied request: no system call
            return None
        port, host = _address(proc)
        if not port:
            return None
        return port, proc.secret, proc.task_type, host

    # ------------------------------------------------------------ stopping

    def _kill_group(self, proc: TaskProcess, signum: int) -> None:
        """SIGTERM or SIGKILL to the task's process group, through its keeper."""
        proc.popen.signal(signum)

    def stop_all(self) -> None:
        """The master stops (gracefully): kill every task and record why it ended."""
        for proc in self._procs.values():
            proc.stop.set()
            self._kill_group(proc, signal.SIGKILL)
        for proc in self._procs.values():
            if not proc.popen.wait(timeout=10):  # a keeper that does not answer: its task dies with it
                proc.popen.kill_keeper()
                proc.popen.wait(timeout=5)
        if not self._procs:
            return
        with self.master.write(wake=False) as s:
            for task_id, proc in self._procs.items():
                self._tail(s, proc, final=True)
                found = keeper.read_exit(proc.popen.dir) or {}
                if not found:
                    keeper.kill_leftovers(proc.popen.dir, task_id)
                self._note_dropped(s, task_id, found)
                _revoke(s, proc)
                task = s.get(Task, task_id)
                if task is not None and task.state != states.TERMINATED:
                    code = found.get("exit_code") if isinstance(found.get("exit_code"), int) else None
                    records.end(s, task, code, "the master stopped, and the task with it")
                self._release(proc.slot_ids)
                self._clean(proc)
        self._procs.clear()


def _revoke(s: Any, proc: TaskProcess) -> None:
    """The task's token opens nothing once the task ended."""
    if proc.token_hash:
        from determined.master.db.models import AuthToken

        row = s.scalars(select(AuthToken).where(AuthToken.token_hash == proc.token_hash)).first()
        if row is not None:
            row.revoked = True


def _address(proc: TaskProcess) -> Tuple[int, str]:
    """(port, host) where the task's server listens: on a Ray node, what its node said (rm/ray_tasks.py); else
    this machine's loopback."""
    where = getattr(proc.popen, "address", None)
    if callable(where):
        found = where()
        return (int(found[1]), str(found[0])) if found else (0, "")
    return proc.port or 0, "127.0.0.1"


def _keeper_dir(run_dir: str) -> str:
    """The keeper's files (its log and exit files): beside the run directory, the master's only, never the task's."""
    return run_dir.rstrip("/") + ".keeper"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _link(owner: Optional[User]) -> Optional[Dict[str, Any]]:
    if owner is None:
        return None
    from determined.master.security.users import agent_user_group

    return agent_user_group(owner)


def _config_env(config: Any) -> Dict[str, str]:
    from determined.master.tasks.config import _env_vars

    env, _ = _env_vars(((config or {}).get("environment") or {}).get("environment_variables"))
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
