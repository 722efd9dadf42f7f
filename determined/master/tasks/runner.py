"""Runs interactive tasks: starts their processes on free slots, captures their output as task logs, follows a
notebook's or TensorBoard's readiness and idleness, kills them, and records how each ended.

It lives beside the resource manager: the master's scheduler thread calls `tick()` before it schedules trials, so
a queued task takes free slots first (tasks are never preempted, as in Determined), and the slots it holds are
marked used in the local resource manager itself, so trials wait for them and never get the same slot ids.
Processes start in the master's scheduler thread (they die with it, as trial processes do), in a run directory
of their own, from the resource manager's environment allow-list; on a server with run-as accounts
(`det master up --trial-user`, issue 33) a task runs as its owner's linked account, in a bubblewrap sandbox of its
own (rm/sandbox.py, as a trial's, with every storage root empty) when the server can make one.
"""
import dataclasses
import datetime
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, List, Optional, Tuple

from sqlalchemy import select

from determined.common._process import die_with_parent
from determined.master.db import User, utcnow
from determined.master.db.models import Task
from determined.master.rm.log_lines import DEFAULT_LINE_BYTES, capped_lines
from determined.master.rm.trial_env import inherited_environment, trial_environment
from determined.master.tasks import notebook, records, states

logger = logging.getLogger("determined.master")

TERM_GRACE_S = 5.0  # a killed task gets SIGTERM, then SIGKILL this much later
DEFAULT_POLL_S = 5.0  # how often a notebook's or TensorBoard's readiness and idleness are read
TENSORBOARD_TIMEOUT_S = 300.0  # Determined's master `tensorboard_timeout`
DEFAULT_TASK_LOG_BYTES = 256 * 2**20  # a task's logs when the master has no log limits
ACTIVITY_STEP_S = 5.0  # a server task's stored last_activity follows its use to within this
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
    popen: "subprocess.Popen[bytes]"
    slot_ids: List[int]
    run_dir: str
    readers: List[threading.Thread]
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
    token: str = ""  # the owner's token the task acts with: revoked when it ends
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
        self._lines: List[Tuple[str, datetime.datetime, str, str]] = []
        self._lines_lock = threading.Lock()
        self._own_used: set = set()  # slot ids held by tasks, for a resource manager without `_used`
        self.ticks = 0  # ticks run (tests wait for ticks, not for time)

    # ------------------------------------------------------------ slots

    def _rm_used(self) -> Optional[set]:
        used = getattr(self.master.rm, "_used", None)
        return used if isinstance(used, set) else None

    def _free_slot_ids(self) -> List[int]:
        rm = self.master.rm
        total = int(rm.total_slots or 0)
        used = self._rm_used()
        taken = used if used is not None else self._own_used
        free = [i for i in range(total) if i not in taken]
        if used is None:  # another resource manager: what it says is free, less what tasks hold
            free = free[:max(0, rm.free_slots() - len(self._own_used))]
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
        """At the master's start: tasks recorded as running have no process (it ended with the previous master);
        record why. Queued tasks stay queued."""
        with self.master.write(wake=False) as s:
            left = list(s.scalars(select(Task).where(Task.state.in_(states.HOLDING))))
            for task in left:
                records.end(s, task, None, "the master stopped while the task ran, and its process ended with it; "
                                           "start it again")
        return len(left)

    def tick(self) -> None:
        """One step, from the master's scheduler thread: logs, ends, kills, readiness and idleness, starts."""
        self.ticks += 1
        self._record_exits()
        self._flush_logs()
        self._follow()
        self._start_queued()
        self._flush_logs()

    def _flush_logs(self) -> None:
        with self._lines_lock:
            lines, self._lines = self._lines, []
        if lines:
            with self.master.write(wake=False) as s:
                records.add_logs(s, lines)

    def _record_exits(self) -> None:
        ended = [(tid, p) for tid, p in list(self._procs.items()) if p.popen.poll() is not None]
        if not ended:
            return
        for _, proc in ended:
            for reader in proc.readers:
                reader.join(timeout=2.0)
        self._flush_logs()
        with self.master.write(wake=False) as s:
            for task_id, proc in ended:
                code = proc.popen.returncode
                proc.stop.set()
                self._kill_group(proc, signal.SIGKILL)  # leftovers it started in its session
                del self._procs[task_id]
                self._release(proc.slot_ids)
                shutil.rmtree(proc.run_dir, ignore_errors=True)
                _revoke(s, proc)
                task = s.get(Task, task_id)
                if task is None:
                    continue
                if proc.idle_reason:
                    reason = proc.idle_reason
                elif task.kill_requested:
                    reason = task.end_reason or "killed"
                elif code == 0:
                    reason = "the task's process exited successfully"
                else:
                    reason = f"the task's process failed with exit code {code}" if code > 0 else \
                        f"the task's process was ended by signal {-code}"
                records.end(s, task, code, reason)
                logger.info("task %s ended: %s (exit code %s)", task_id, reason, code)

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
            task.pid = proc.popen.pid
            task.port = proc.port
            task.host = "127.0.0.1" if proc.port else None
            records.add_log(s, task_id, records.MASTER_STREAM,
                            f"started (pid {proc.popen.pid}) on {len(slot_ids)} slot(s) {slot_ids}")
            if task.task_type != states.COMMAND:
                threading.Thread(target=self._watch_server, args=(proc,), name=f"task-{task_id[:8]}-watch",
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
                                       request=RunRequest(account=_link(owner)), cwd=work_dir)
                popen_kwargs = {"umask": 0o022}  # bwrap starts as root; setpriv inside takes the account
            else:
                popen_kwargs = {**account.popen_kwargs(), "umask": 0o077}
        popen = subprocess.Popen(command, cwd=work_dir if task.config.get("work_dir") else run_dir, env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, preexec_fn=die_with_parent, **popen_kwargs)
        line_bytes = getattr(rm, "line_bytes", DEFAULT_LINE_BYTES)
        readers = [self._reader(task.id, "stdout", popen.stdout, line_bytes),
                   self._reader(task.id, "stderr", popen.stderr, line_bytes)]
        threading.Thread(target=self._wait, args=(popen,), name=f"task-{task.id[:8]}-wait", daemon=True).start()
        return TaskProcess(task.id, task.task_type, popen, list(slot_ids), run_dir, readers, port=port,
                           secret=task.service_secret, idle_type=str(task.config.get("notebook_idle_type")
                                                                      or "kernels_or_terminals"),
                           sandboxed=sandbox is not None, token=token)

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

    def _wait(self, popen: "subprocess.Popen[bytes]") -> None:
        popen.wait()
        self.master.wake()

    def _log_budget(self) -> int:
        """The bytes of logs one task may keep: the master's trial_log_max_bytes (logs.LogLimits)."""
        writer = getattr(self.master, "log_writer", None)
        limits = getattr(writer, "limits", None)
        return int(getattr(limits, "trial_bytes", DEFAULT_TASK_LOG_BYTES) or DEFAULT_TASK_LOG_BYTES)

    def _reader(self, task_id: str, stream: str, pipe: Optional[IO[bytes]], line_bytes: int) -> threading.Thread:
        budget = self._log_budget() // 2  # each of stdout and stderr
        def read() -> None:
            assert pipe is not None
            kept, dropped = 0, 0
            for line in capped_lines(pipe, line_bytes):
                kept += len(line)
                if kept > budget:  # the rest is read (the task must not block on a full pipe) but not stored
                    dropped += 1
                    continue
                with self._lines_lock:
                    self._lines.append((task_id, utcnow(), stream, line))
            if dropped:
                with self._lines_lock:
                    self._lines.append((task_id, utcnow(), records.MASTER_STREAM,
                                        f"{dropped} later line(s) of {stream} were not kept: the task's logs are "
                                        f"limited to {budget} bytes per stream (trial_log_max_bytes / 2)"))
            pipe.close()

        thread = threading.Thread(target=read, name=f"task-{task_id[:8]}-{stream}", daemon=True)
        thread.start()
        return thread

    def _watch_server(self, proc: TaskProcess) -> None:
        """Reads the server's readiness, then (notebooks) its idleness from Jupyter's own API, every `poll_s`."""
        previous: Optional[Any] = None
        while not proc.stop.is_set() and proc.popen.poll() is None:
            if not proc.ready:
                if notebook.answers(proc.port or 0, f"/proxy/{proc.task_id}/", proc.secret, proc.task_type):
                    proc.ready = True
                    proc.active_at = utcnow()
                    self.master.wake()
                proc.stop.wait(min(self.poll_s, 0.2))
                continue
            if proc.task_type == states.NOTEBOOK:
                state = notebook.read_activity(proc.port or 0, f"/proxy/{proc.task_id}/", proc.secret or "")
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

    def endpoint(self, task_id: str) -> Optional[Tuple[int, Optional[str], str]]:
        """(port, secret, task type) of a running server task of this master, or None."""
        proc = self._procs.get(task_id)
        if proc is None or not proc.port or proc.popen.poll() is not None:
            return None
        return proc.port, proc.secret, proc.task_type

    # ------------------------------------------------------------ stopping

    def _kill_group(self, proc: TaskProcess, signum: int) -> None:
        try:
            os.killpg(proc.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def stop_all(self) -> None:
        """The master stops: kill every task and record why it ended."""
        for proc in self._procs.values():
            proc.stop.set()
            self._kill_group(proc, signal.SIGKILL)
        for proc in self._procs.values():
            try:
                proc.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for reader in proc.readers:
                reader.join(timeout=2.0)
        self._flush_logs()
        if not self._procs:
            return
        with self.master.write(wake=False) as s:
            for task_id, proc in self._procs.items():
                _revoke(s, proc)
                task = s.get(Task, task_id)
                if task is not None and task.state != states.TERMINATED:
                    records.end(s, task, proc.popen.returncode, "the master stopped, and the task with it")
                self._release(proc.slot_ids)
                shutil.rmtree(proc.run_dir, ignore_errors=True)
        self._procs.clear()


def _revoke(s: Any, proc: TaskProcess) -> None:
    """The task's token opens nothing once the task ended."""
    if proc.token:
        from determined.master.security import auth

        auth.revoke_token(s, proc.token)


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
