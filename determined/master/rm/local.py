"""The local resource manager: one process per trial run on this machine, its output captured as trial logs."""
import dataclasses
import datetime
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from determined.common._process import die_with_parent
from determined.exec import forkserver
from determined.exec._environment import RUN_CONTEXT_ENV, write_run_context
from determined.exec.prestart import HARNESS_COMMAND, PrestartPool
from determined.master.rm.agent_state import AgentState
from determined.master.rm.log_lines import DEFAULT_LINE_BYTES, capped_lines
from determined.master.rm.sandbox import (RunRequest, Sandbox, SandboxRefused, account_of, prepare_tensorboard_dir)
from determined.master.rm.slots import Slots, detect_slots
from determined.master.rm.trial_env import TrialUser, inherited_environment, trial_environment

logger = logging.getLogger("determined.master")

LogSink = Callable[[int, datetime.datetime, str, str], None]
DEFAULT_TRIAL_COMMAND: Tuple[str, ...] = (sys.executable, "-m", "determined.exec.harness")
# A run on several slots: one launcher process that starts and watches a worker per slot.
LAUNCH_COMMAND: Tuple[str, ...] = (sys.executable, "-m", "determined.exec.launch")
# How many prestarted harness processes wait for the next 1-slot trial (default: one per slot, at most
# MAX_PRESTART); 0 turns prestarting off.
PRESTART_ENV = "DET_HARNESS_PRESTART"
# 0 turns the fork servers off (every Trial class then starts in a fresh or prestarted process).
WARM_ENV = "DET_FORK_SERVER"
MAX_PRESTART = 4
# A run of a script that is killed gets SIGTERM first (its handlers may checkpoint), SIGKILL this much later.
TERM_GRACE_S = 10.0


@dataclasses.dataclass
class TrialProcess:
    trial_id: int
    allocation_id: str
    popen: "subprocess.Popen[bytes] | forkserver.ForkedProcess"
    slots: List[int]
    work_dir: str
    readers: List[threading.Thread]
    preempt_deadline: Optional[float] = None
    killed: bool = False
    script: bool = False
    kill_deadline: Optional[float] = None  # when a script run that got SIGTERM is SIGKILLed
    sandboxed: bool = False  # its process is bwrap (rm/sandbox.py), which a SIGTERM would end with the whole run


class LocalResourceManager:
    """Starts trial processes on free slots of this machine, watches them, preempts and kills them.

    A run on one slot is one process. A run on N > 1 slots is `python -m determined.exec.launch`, which
    starts N worker processes (ranks, rendezvous, one GPU or an equal share of the CPU threads each) and
    exits non-zero as soon as one of them fails; the RM still sees one process per run, and killing its
    process group kills every worker. A run whose entrypoint is a command (`script`) is one harness process
    holding all its slots (DET_SLOT_IDS), whatever their number: its command starts the workers
    (determined.launch). Killing a script run sends SIGTERM to its process group, then SIGKILL TERM_GRACE_S
    later.

    `trial_command` replaces `python -m determined.exec.harness` as the program a trial runs; it exists for
    tests of the master that use a small fake trial program instead of the real harness.

    A 1-slot run starts as a child of a fork server (determined/exec/forkserver.py): a Trial class whose framework
    the master read from its source (`framework`, see determined/common/framework_scan.py) in that framework's
    server, which has imported the harness and the framework once; every other 1-slot run (a Native API command, a
    script, another framework's Trial class), or one whose import-time variables differ from the framework
    server's, in the harness-only server, which has imported the harness alone. A server starts with the first run
    that needs it (which waits for its imports instead of paying them itself). A run that neither server can take
    (variables read at interpreter start that differ from theirs, a run on several slots) starts in a prestarted
    process (`determined.exec.prestart`) when one is idle: Python has started and imported the harness while
    earlier trials ran. `prestart` (default: the DET_HARNESS_PRESTART variable, else one per slot up to
    MAX_PRESTART) is how many wait; 0 turns prestarting and the fork servers off, and DET_FORK_SERVER=0 the fork
    servers (runs then start prestarted or cold).
    `exit_listener` is called, from a watcher thread, as soon as a run's process ends, so that the caller
    can reap it without waiting for its next poll.

    Every trial process (prestarted or not, launcher included) starts from `trial_env.trial_environment`, an
    allow-list of this process's environment (a server's), or with `inherit_environment` (an embedded master, whose
    trials are its user's own programs) from this process's whole environment but its DET_* variables, plus the
    experiment's variables (`launch(env=...)`). With
    `trial_user`, it runs as its submitting user's linked OS account (`launch(run=RunRequest(account=...))`), else as
    `trial_user` (this process must be root), in a run directory owned by that account, with umask 077; with
    `sandbox` (rm/sandbox.py), inside a bubblewrap sandbox of its own, started cold (a fork server's or prestarted
    process's namespaces and account are not the run's).
    """

    def __init__(
        self,
        work_root: str,
        log_sink: LogSink,
        *,
        slots: Optional[Slots] = None,
        trial_command: Optional[Sequence[str]] = None,
        prestart: Optional[int] = None,
        trial_user: Optional[TrialUser] = None,
        line_bytes: int = DEFAULT_LINE_BYTES,
        inherit_environment: bool = False,
        sandbox: Optional[Sandbox] = None,
    ) -> None:
        self.work_root = work_root
        self.sandbox = sandbox if trial_user is not None else None
        # The master hands launch() each run's RunRequest (its user's account, what its sandbox shows).
        self.runs_as_users = trial_user is not None
        self.inherit_environment = inherit_environment and trial_user is None
        self.line_bytes = line_bytes  # the longest output line kept whole (log_lines.capped_lines)
        self.trial_user = trial_user
        # The default account's processes (a fork server's and prestarted ones too) write files only it can read.
        self._popen_user = {**trial_user.popen_kwargs(), "umask": 0o077} if trial_user is not None else {}
        self.log_sink = log_sink
        self.slots = slots if slots is not None else detect_slots()
        self.trial_command = list(trial_command) if trial_command else list(DEFAULT_TRIAL_COMMAND)
        self._processes: Dict[str, TrialProcess] = {}
        self._used: set = set()
        # `det agent disable|enable` and `det slot disable|enable` of this machine's one agent (rm/agent_state.py)
        self.agent = AgentState()
        self.exit_listener: Optional[Callable[[], None]] = None
        self._pool: Optional[PrestartPool] = None
        size = _prestart_size(prestart, self.slots.total) if self.sandbox is None else 0
        self.warm = (size > 0 and self.trial_command == list(HARNESS_COMMAND)  # fork servers per framework
                     and os.environ.get(WARM_ENV, "").strip() != "0")
        self._servers: Dict[str, forkserver.ForkServer] = {}
        if size > 0 and self.trial_command == list(HARNESS_COMMAND):
            self._pool = PrestartPool(size, work_root, env=self.base_env, preexec_fn=die_with_parent,
                                      popen_kwargs=self._popen_user)

    # ------------------------------------------------------------ capacity

    @property
    def total_slots(self) -> int:
        return self.slots.total

    @property
    def agent_id(self) -> str:
        """The id of the one agent this resource manager is (`det agent list`): this machine's host name."""
        return socket.gethostname() or "localhost"

    def free_slots(self) -> int:
        return len(self.free_slot_ids())

    def free_slot_ids(self) -> List[int]:
        """The indices of the free slots a new run may get (a resource pool with slots of its own counts its free
        ones): not held, and not disabled (`det agent disable`, `det slot disable`)."""
        return [i for i in range(self.slots.total) if i not in self._used and self.agent.takes(i)]

    def running(self) -> Dict[str, TrialProcess]:
        return dict(self._processes)

    # ------------------------------------------------------------ lifecycle

    def command_for(self, slots_needed: int) -> List[str]:
        """The program of a run on `slots_needed` slots: the trial command, under the launcher when > 1."""
        if slots_needed <= 1:
            return list(self.trial_command)
        return [*LAUNCH_COMMAND, "--nproc-per-node", str(slots_needed), "--", *self.trial_command]

    def base_env(self, account: Optional[TrialUser] = None) -> Dict[str, str]:
        """The environment every trial process of this RM starts from (see trial_env.trial_environment); `account`:
        the run's OS account, when not the default one."""
        account = account or self.trial_user
        home = None
        if account is not None:
            home = self.home_of(account)
        if self.inherit_environment:
            return inherited_environment(os.environ)
        return trial_environment(os.environ, user=account, home=home)

    def home_of(self, account: TrialUser) -> str:
        """The account's home directory when it owns one, else a spare one (see _spare_home)."""
        return account.home if account.home and _owned_dir(account.home, account.uid) else self._spare_home(account)

    def warm_env(self) -> Dict[str, str]:
        """The environment a fork server starts with: a 1-slot run's, before the run's own variables."""
        return warm_environment(self.base_env(), self.slots)

    def _server(self, framework: str) -> Optional[forkserver.ForkServer]:
        """The fork server of `framework`, started (or adopted from `forkserver.prewarm`) on first use."""
        server = self._servers.get(framework)
        if server is not None and server.alive():
            return server
        if framework not in forkserver.SERVERS:
            return None
        env = self.warm_env()
        server = forkserver.take_prewarmed(framework, env, self._popen_user)
        if server is None:
            logger.info("starting the %s fork server (%s)", framework,
                        "the 1-slot runs no framework's server takes start in it" if framework == forkserver.HARNESS_ONLY
                        else "trials of that framework start in it")
            server = forkserver.ForkServer(framework, self.work_root, env, preexec_fn=die_with_parent,
                                           popen_kwargs=self._popen_user)
        self._servers[framework] = server
        return server

    def _spawn_warm(self, framework: str, env: Mapping[str, str], work_dir: str,
                    preload: Sequence[str] = ()) -> Optional[forkserver.ForkedProcess]:
        server = self._server(framework)
        if server is None:
            return None
        if forkserver.startup_variables(framework, env) != forkserver.startup_variables(framework, server.env):
            return None  # the run's thread counts, paths or framework settings differ: a fresh process reads them
        if not server.ready(forkserver.READY_TIMEOUT_S):
            logger.warning("the %s fork server is not serving; trials start cold", framework)
            return None
        return server.spawn(env, work_dir, preload)

    def _spare_home(self, account: TrialUser) -> str:
        """A home directory for an account whose own does not exist: private to it, kept across runs."""
        name = account.name if account == self.trial_user else f"uid{account.uid}"
        path = os.path.join(self.work_root, f".home-{name}")
        if not _owned_dir(path, account.uid):
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chown(path, account.uid, account.gid)
            os.chmod(path, 0o700)
        return path

    # The master may give `launch` the run's context (`context=`): the answer the run would get to its first
    # request, `GET /trials/{id}/context?with_model_def=true&with_operation=true`.
    hands_over_context = True

    def launch(self, *, trial_id: int, experiment_id: int, allocation_id: str, token: str, slots_needed: int,
               master_url: str, env: Optional[Mapping[str, str]] = None, script: bool = False,
               framework: Optional[str] = None, preload: Sequence[str] = (),
               context: Optional[Mapping[str, Any]] = None, run: Optional[RunRequest] = None,
               slot_ids: Optional[Sequence[int]] = None) -> TrialProcess:
        """Start a run of a trial on `slots_needed` free slots (one process holding them all when `script`); `env`:
        the experiment's own variables; `framework`: the one its Trial class imports, when known, and `preload`
        the modules from outside its model directory that it imports (the fork server imports them once);
        `context`: the run's context, handed to it in a file of its run directory (`write_run_context`), so that
        it does not ask for it; `run`: its account and what its sandbox shows (see the class); `slot_ids`: the
        slots it may take (its resource pool's, scheduling/pools.py; default: any enabled one)."""
        allowed = range(self.slots.total) if slot_ids is None else slot_ids
        free = [i for i in allowed if i not in self._used and self.agent.takes(i)]
        if len(free) < slots_needed:
            raise RuntimeError(f"trial {trial_id} needs {slots_needed} slots but only {len(free)} are free")
        chosen = free[:slots_needed]
        work_dir = os.path.join(self.work_root, allocation_id)
        os.makedirs(work_dir, exist_ok=True)
        run = run or RunRequest()
        account = account_of(run.account, self.trial_user) if self.trial_user is not None else None
        if account is not None:
            os.chown(work_dir, account.uid, account.gid)
            os.chmod(work_dir, 0o700)
            if run.tensorboard_dir:
                prepare_tensorboard_dir(run.tensorboard_dir, account)
        proc_env = self.base_env(account)
        if context is not None:
            owner = (account.uid, account.gid) if account is not None else None
            proc_env[RUN_CONTEXT_ENV] = write_run_context(work_dir, context, owner)
        cores = os.cpu_count() or 1
        if self.slots.kind == "gpu":
            visible = ",".join(self.slots.gpus[i] for i in chosen)
            threads = max(1, cores * slots_needed // max(1, self.slots.total))
        else:
            visible = ""
            threads = max(1, cores // max(1, self.slots.total)) * max(1, slots_needed)  # 0 slots: one's share
        proc_env["OMP_NUM_THREADS"] = str(threads)
        proc_env.update(env or {})  # the experiment's environment_variables; the platform's own variables win
        proc_env.update({
            "DET_MASTER": master_url,
            "DET_TRIAL_ID": str(trial_id),
            "DET_EXPERIMENT_ID": str(experiment_id),
            "DET_ALLOCATION_ID": allocation_id,
            "DET_SESSION_TOKEN": token,
            "CUDA_VISIBLE_DEVICES": visible,
            "DET_SLOT_IDS": json.dumps(chosen),
        })
        one_process = slots_needed == 1 or script
        # A prestarted harness has started its interpreter: variables Python reads at start need a new process.
        poolable = one_process and not any(n.startswith(("PYTHON", "LD_")) for n in (env or {}))
        popen: "Optional[subprocess.Popen[bytes] | forkserver.ForkedProcess]" = None
        how = ""
        command = list(self.trial_command) if one_process else self.command_for(slots_needed)
        popen_user = self._popen_user
        shared = True  # may start in a fork server or a prestarted process (the default account's, unsandboxed)
        if account is not None and account != self.trial_user:
            shared, popen_user = False, {**account.popen_kwargs(), "umask": 0o077}
        if self.sandbox is not None and account is not None:
            try:
                command = self.sandbox.argv(command, run_dir=work_dir, home=proc_env.get("HOME", ""),
                                            account=account, request=run)
            except SandboxRefused as e:
                now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                self.log_sink(trial_id, now, "stderr", f"the trial cannot start: {e}")
                raise
            # bwrap runs as root to make the mounts; inside, setpriv takes the account and the run sets umask 077.
            popen_user, how = {"umask": 0o022}, f", sandboxed as {account.name} (uid {account.uid})"
        elif account is not None and account != self.trial_user:
            how = f", as {account.name} (uid {account.uid})"
        if self.warm and slots_needed == 1 and shared:
            for server in _servers_to_try(framework, script):
                popen = self._spawn_warm(server, proc_env, work_dir,
                                         preload if server != forkserver.HARNESS_ONLY else ())
                if popen is not None:
                    how = f", forked from the {server} server"
                    break
        if popen is None and self._pool is not None and poolable and shared:
            popen = self._pool.take(proc_env, work_dir)
            how = ", prestarted" if popen is not None else ""
        if popen is None:
            popen = subprocess.Popen(
                command,
                cwd=work_dir,
                env=proc_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=die_with_parent,  # after the change of user, which would clear it
                **popen_user,
            )
        readers = [self._reader(trial_id, "stdout", popen.stdout), self._reader(trial_id, "stderr", popen.stderr)]
        self._watch(trial_id, popen)
        proc = TrialProcess(trial_id, allocation_id, popen, chosen, work_dir, readers, script=script,
                            sandboxed=self.sandbox is not None and account is not None)
        self._processes[allocation_id] = proc
        self._used.update(chosen)
        logger.info("trial %s: started run %s (pid %s%s) on %s slot(s) %s", trial_id, allocation_id, popen.pid,
                    how, self.slots.kind, chosen)
        return proc

    def _watch(self, trial_id: int, popen: "subprocess.Popen[bytes]") -> None:
        """Tell `exit_listener` when the process ends."""
        def wait() -> None:
            popen.wait()
            listener = self.exit_listener
            if listener is not None:
                listener()

        threading.Thread(target=wait, name=f"trial-{trial_id}-wait", daemon=True).start()

    def _reader(self, trial_id: int, stream: str, pipe: Optional[IO[bytes]]) -> threading.Thread:
        def read() -> None:
            assert pipe is not None
            for line in capped_lines(pipe, self.line_bytes):
                now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                self.log_sink(trial_id, now, stream, line)
            pipe.close()

        thread = threading.Thread(target=read, name=f"trial-{trial_id}-{stream}", daemon=True)
        thread.start()
        return thread

    def poll_exited(self) -> List[Tuple[int, str, int]]:
        """Runs whose process has ended, as (trial id, allocation id, exit code); their slots are freed."""
        exited = []
        for allocation_id, proc in list(self._processes.items()):
            code = proc.popen.poll()
            if code is None:
                continue
            for reader in proc.readers:
                reader.join(timeout=2.0)
            self._kill_group(proc)  # leftovers the trial started in its session
            del self._processes[allocation_id]
            self._used.difference_update(proc.slots)
            shutil.rmtree(proc.work_dir, ignore_errors=True)
            exited.append((proc.trial_id, allocation_id, code))
        return exited

    def preempt(self, allocation_id: str, timeout: float) -> None:
        """The run was asked (through the preemption signal) to checkpoint and exit; kill it after `timeout` s."""
        proc = self._processes.get(allocation_id)
        if proc is not None and proc.preempt_deadline is None:
            proc.preempt_deadline = time.monotonic() + timeout

    def enforce_deadlines(self) -> None:
        now = time.monotonic()
        for allocation_id, proc in list(self._processes.items()):
            if proc.preempt_deadline is not None and now > proc.preempt_deadline and not proc.killed:
                logger.warning("trial %s did not exit after preemption; killing it", proc.trial_id)
                self.kill(allocation_id)
            if proc.kill_deadline is not None and now > proc.kill_deadline:
                proc.kill_deadline = None
                logger.warning("trial %s did not exit %.0f s after SIGTERM; SIGKILL", proc.trial_id, TERM_GRACE_S)
                self._kill_group(proc)

    def kill(self, allocation_id: str) -> None:
        """SIGKILL the run's whole process group (a script's: SIGTERM first, SIGKILL TERM_GRACE_S later)."""
        proc = self._processes.get(allocation_id)
        if proc is not None and not proc.killed:
            proc.killed = True
            if proc.script:
                proc.kill_deadline = time.monotonic() + TERM_GRACE_S
                self._kill_group(proc, signal.SIGTERM)
            else:
                self._kill_group(proc)

    def kill_all(self) -> None:
        """SIGKILL every run, and the idle prestarted processes (later runs start without them)."""
        for proc in list(self._processes.values()):
            proc.killed = True
            self._kill_group(proc)
        if self._pool is not None:
            self._pool.close()
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()

    @staticmethod
    def _kill_group(proc: TrialProcess, signum: int = signal.SIGKILL) -> None:
        if proc.sandboxed and signum != signal.SIGKILL:
            # bwrap dies of a SIGTERM and its PID namespace with it: the run's own processes get the signal, and
            # their handlers the time to checkpoint, as outside a sandbox.
            for pid in _group_members(proc.popen.pid):
                if pid != proc.popen.pid:
                    try:
                        os.kill(pid, signum)
                    except (ProcessLookupError, PermissionError):
                        pass
            return
        try:
            os.killpg(proc.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _group_members(pgid: int) -> List[int]:
    """The processes of process group `pgid` (from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(pgid):
                members.append(int(entry))
    return members


def warm_environment(base: Mapping[str, str], slots: Slots) -> Dict[str, str]:
    """The environment of a fork server of an RM with `slots` whose trials start from `base`: a 1-slot run's,
    before the run's own variables (launch sets OMP_NUM_THREADS the same way)."""
    return {**base, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // max(1, slots.total)))}


def _owned_dir(path: str, uid: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid


def _servers_to_try(framework: Optional[str], script: bool) -> List[str]:
    """The fork servers a 1-slot run may start in, in order: its framework's (a Trial class whose framework has
    one), then the harness-only server, whose child imports what it needs itself."""
    first = forkserver.HARNESS_ONLY if script else forkserver.server_for(framework)
    return [first] if first == forkserver.HARNESS_ONLY else [first, forkserver.HARNESS_ONLY]


def _prestart_size(prestart: Optional[int], total_slots: int) -> int:
    if prestart is None:
        raw = os.environ.get(PRESTART_ENV, "").strip()
        if not raw:
            return min(max(total_slots, 1), MAX_PRESTART)
        try:
            prestart = int(raw)
        except ValueError:
            raise ValueError(f"{PRESTART_ENV}={raw!r}: set it to how many prestarted harness processes to keep "
                             "(an integer, 0 turns prestarting off)") from None
    if prestart < 0:
        raise ValueError(f"prestart must be 0 or more prestarted harness processes, got {prestart}")
    return prestart
