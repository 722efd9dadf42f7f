"""The code that runs on Ray nodes: the actor that starts one rank of a trial, and the storage check task.

`RankWorker` is wrapped with `ray.remote` by the Ray resource manager. Each instance lives in one bundle of
a trial's placement group and runs one trial process (`python -m determined.exec.harness`, one rank) in its
own session. The process dies with the actor (PR_SET_PDEATHSIG from a thread that outlives it) and its
whole process group is signalled by `kill_group` (SIGKILL; SIGTERM first for a script's run). Its stdout and stderr lines are buffered here and handed
to the master through `drain`, a long poll (the actor is threaded, so `drain` and `kill_group` can wait at
the same time). The master may keep a worker whose process exited 0 for the next run of the same size.
A run of a master with a trial user starts as its user's OS account, in a sandbox when the node can make one
(`start(run_as=...)`, `isolation_problem`). The same actor starts an interactive task's process on its node
(`start_task`, rm/ray_tasks.py): its run directory filled from the master's spec, its server on the node's IP.

This module imports nothing from Ray at import time, so the master's package stays importable without it.
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, IO, List, NoReturn, Optional, Sequence, Tuple

_PR_SET_PDEATHSIG = 1
MAX_LINES_PER_DRAIN = 5000
DRAIN_LINGER_S = 0.25
# Where a node keeps the directories of runs started as their users' accounts (root's, 0711; each run's directory
# is its account's, 0700). Not under /tmp: a sandboxed run gets a private /tmp of its own.
RUN_AS_ROOT = "/run/determined-ray"
_ISOLATION_PROBLEM: List[Optional[str]] = []  # this worker process's answer of `isolation_problem`, once asked

Line = Tuple[float, str, str]  # (unix time, "stdout" | "stderr", text)
# An interactive task's preparation of its run directory: (run dir, account or None, argv, env) -> (argv, env).
Prepare = Callable[[str, Any, List[str], Dict[str, str]], Tuple[List[str], Dict[str, str]]]


def _die_with_parent_fn() -> Optional[Callable[[], None]]:
    """The preexec_fn that sets PR_SET_PDEATHSIG, with prctl looked up now, in the parent: a dlopen between
    fork and exec can deadlock when another thread held the loader's lock at the fork. (Built in the actor's
    process: this module travels to the nodes pickled, and a ctypes function cannot.)"""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _node_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())


class RankWorker:
    """One rank of a trial run on a Ray node (a threaded Ray actor: max_concurrency >= 2)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lines: List[Line] = []
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._exit_code: Optional[int] = None
        self._start_error: Optional[str] = None
        self._readers: List[threading.Thread] = []
        self._work_dir: Optional[str] = None
        self._run: Optional[str] = None  # the allocation id of the run whose process this worker started last
        self._idle: Optional["subprocess.Popen[bytes]"] = None  # a prestarted harness for the next run
        self._server: Any = None  # this worker's harness-only fork server (determined.exec.forkserver.ForkServer)
        self._server_lock = threading.Lock()  # warm() and a run's start() may both start the server
        self._die_with_parent = _die_with_parent_fn()

    def where(self) -> Dict[str, Any]:
        """This rank's node: id, IP, the GPU ids of its bundle, and two free ports (the chief's rendezvous)."""
        import ray

        ip = _node_ip()
        ports: List[int] = []
        while len(ports) < 2:
            port = _free_port("0.0.0.0")
            if port not in ports:
                ports.append(port)
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ip,
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "ports": ports,
            "pid": os.getpid(),
        }

    def start(self, command: Sequence[str], env_updates: Dict[str, str],
              prestart: Optional[Sequence[str]] = None, *, fork_server: bool = False,
              context: Optional[Dict[str, Any]] = None, run_as: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Start the trial process; {"pid": its pid, "not_isolated": why the run is not isolated on this node
        (None: it is, or it was not asked)}. `command[0]` "python" means this worker's own interpreter.

        `run_as` (a master with a trial user): {"request": the run's RunRequest, "default": the default TrialUser,
        "data_dir", "storage_roots", "hidden": the master's paths a sandbox hides}. The run then starts cold (no
        fork server, no prestarted process: those are the worker's own user's) as its account, in a bubblewrap
        sandbox when this node can make one (rm/sandbox.py), else as its account only, else (the worker does not run
        as root) as the worker's user; the answer says which.

        A worker kept for reuse starts the next run's process after the previous one exited and was drained.
        With `fork_server` (`command` is the harness), the worker starts a harness-only fork server
        (determined/exec/forkserver.py) with its first run, and forks the runs after it from there: a fork
        instead of a process that imports the harness. Without it (or while the server starts), with `prestart`
        (`python -m determined.exec.prestart`, which runs the harness like `command`) the worker keeps one
        prestarted harness process ready for its next run, and uses it when it has one. `context`: the run's
        context, written into the run's directory for the harness (determined.exec._environment.take_run_context).
        """
        with self._cond:
            if self._proc is not None and self._exit_code is None:
                raise RuntimeError("this worker's previous trial process still runs")
            self._lines, self._proc, self._exit_code, self._start_error = [], None, None, None
            self._run = env_updates.get("DET_ALLOCATION_ID")
            self._cond.notify_all()
        if run_as is not None:
            return self._start_as_account(command, env_updates, context, run_as)
        base = self._base_env()
        env = dict(base)
        env.update(env_updates)
        self._work_dir = tempfile.mkdtemp(prefix=f"det-ray-{env_updates.get('DET_ALLOCATION_ID', 'run')}-")
        if context is not None:
            from determined.exec._environment import RUN_CONTEXT_ENV, write_run_context

            env[RUN_CONTEXT_ENV] = write_run_context(self._work_dir, context)
        proc = self._spawn_warm(env, self._work_dir, base) if fork_server else None
        if proc is None:
            proc = self._take_prestarted(env, self._work_dir)
        if proc is None:
            argv = list(command)
            if argv and argv[0] == "python":
                argv[0] = sys.executable
            try:
                proc = self._fork(argv, env, self._work_dir, subprocess.DEVNULL, trial=True)
            except OSError as e:
                with self._cond:
                    self._start_error = f"cannot start {argv[0]!r}: {e.strerror or e}"
                    self._exit_code = 127
                    self._cond.notify_all()
                raise RuntimeError(self._start_error) from None
        if prestart and self._idle is None and (self._server is None or not self._server.alive()):
            argv = list(prestart)
            if argv and argv[0] == "python":
                argv[0] = sys.executable
            try:
                self._idle = self._fork(argv, base, tempfile.gettempdir(), subprocess.PIPE, trial=False)
            except OSError:
                self._idle = None  # the next run starts its process itself
        return {"pid": proc.pid, "not_isolated": None}

    def _start_as_account(self, command: Sequence[str], env_updates: Dict[str, str], context: Optional[Dict[str, Any]],
                          run_as: Dict[str, Any], prepare: Optional["Prepare"] = None, cwd: str = "") -> Dict[str, Any]:
        """`start` of a run that runs as its user's OS account (see `start`). `prepare` (an interactive task's:
        `start_task`) fills the run directory and gives the final command line and environment; `cwd`: the directory
        the process starts in (default: the run directory)."""
        from determined.master.rm.sandbox import Sandbox, SandboxRefused, account_of, prepare_tensorboard_dir

        argv = list(command)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        problem = isolation_problem()["problem"]
        popen: Dict[str, Any] = {}
        if os.geteuid() != 0:  # the worker's own user runs it, in a run directory of its own
            self._work_dir = tempfile.mkdtemp(prefix=f"det-ray-{env_updates.get('DET_ALLOCATION_ID', 'run')}-")
            env = {**self._base_env(), **env_updates}
            owner = None
            if prepare is not None:
                argv, env = prepare(self._work_dir, None, argv, env)
        else:
            request = run_as["request"]
            account = account_of(request.account, run_as["default"])
            os.makedirs(RUN_AS_ROOT, mode=0o711, exist_ok=True)
            os.chmod(RUN_AS_ROOT, 0o711)
            self._work_dir = tempfile.mkdtemp(prefix=f"{env_updates.get('DET_ALLOCATION_ID', 'run')}-", dir=RUN_AS_ROOT)
            os.chown(self._work_dir, account.uid, account.gid)
            owner = (account.uid, account.gid)
            from determined.master.rm.trial_env import trial_environment

            env = {**trial_environment(os.environ, user=account, home=self._home(account)), **env_updates}
            if prepare is not None:
                argv, env = prepare(self._work_dir, account, argv, env)
            if problem is None:
                existing = [p for p in (run_as.get("hidden") or []) if os.path.exists(p)]
                roots = [r for r in (run_as.get("storage_roots") or []) if os.path.isdir(r)]
                sandbox = Sandbox(str(run_as["data_dir"]), storage_roots=roots, hidden=existing)
                tensorboard = request.tensorboard_dir
                if tensorboard and os.path.isdir(os.path.dirname(os.path.dirname(tensorboard))):
                    prepare_tensorboard_dir(tensorboard, account)
                else:  # the master's data dir is not on this node: the run writes its events elsewhere
                    import dataclasses

                    request = dataclasses.replace(request, tensorboard_dir=None)
                try:
                    argv = sandbox.argv(argv, run_dir=self._work_dir, home=env.get("HOME", ""), account=account,
                                        request=request, cwd=cwd)
                except SandboxRefused as e:
                    self._refuse(f"the trial cannot start: {e}")
                popen = {"umask": 0o022}  # bwrap makes the mounts as root; setpriv takes the account inside
            else:
                popen = {**account.popen_kwargs(), "umask": 0o077}
        if context is not None:
            from determined.exec._environment import RUN_CONTEXT_ENV, write_run_context

            env[RUN_CONTEXT_ENV] = write_run_context(self._work_dir, context, owner)
        try:
            sandboxed = popen.get("umask") == 0o022  # bwrap enters `cwd` itself
            proc = self._fork(argv, env, cwd if cwd and not sandboxed else self._work_dir, subprocess.DEVNULL,
                              trial=True, popen=popen)
        except OSError as e:
            self._refuse(f"cannot start {argv[0]!r}: {e.strerror or e}")
        return {"pid": proc.pid, "not_isolated": problem}

    def start_task(self, spec: Dict[str, Any], run_as: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Start an interactive task's process on this node (the master's tasks/remote.py builds `spec`);
        {"pid", "node_id", "ip", "host", "port", "not_isolated"}: `host`:`port` is where its server listens (port 0:
        a command, no server).

        `spec`: {"task_id", "argv", "env", "files": {name: text} written into the run directory (mode 0600),
        "context": the task's context (a .tar.gz, base64) extracted there (its startup-hook.sh is run by the entry
        script among `files`), "server": whether it listens, "work_dir": the config's work_dir or ""}. In `argv` and
        the values of `env`, {PYTHON} is this node's interpreter, {RUN_DIR} the run directory, {HOST} and {PORT}
        the address the server listens on: this node's Ray IP and a free port there ({REMOTE}: "True" when that IP is
        not a loopback address, else "False"). `run_as`: as `start`'s; the task then runs as its owner's account, in
        a sandbox where the node can make one.
        """
        import ray

        task_id = str(spec["task_id"])
        with self._cond:
            if self._proc is not None and self._exit_code is None:
                raise RuntimeError("this worker's previous process still runs")
            self._lines, self._proc, self._exit_code, self._start_error = [], None, None, None
            self._run = task_id
            self._cond.notify_all()
        ip = _node_ip()
        host = "127.0.0.1" if ip.startswith("127.") or ip in ("localhost", "::1") else ip
        port = _free_port(host) if spec.get("server") else 0
        gpus = [str(g) for g in ray.get_gpu_ids()]
        work_dir = str(spec.get("work_dir") or "")

        def prepare(run_dir: str, account: Any, argv: List[str],
                    env: Dict[str, str]) -> Tuple[List[str], Dict[str, str]]:
            if spec.get("context"):
                from determined.exec._model_def import extract_model_def

                extract_model_def(str(spec["context"]), run_dir)
            for name, text in (spec.get("files") or {}).items():
                path = os.path.join(run_dir, os.path.basename(str(name)))
                with open(path, "w", opener=lambda p, flags: os.open(p, flags, 0o600)) as f:
                    f.write(str(text))
            if account is not None:
                for root, dirs, names in os.walk(run_dir):
                    for name in dirs + names:
                        os.lchown(os.path.join(root, name), account.uid, account.gid)
                os.chown(run_dir, account.uid, account.gid)
                os.chmod(run_dir, 0o700)
            values = {"{PYTHON}": sys.executable, "{RUN_DIR}": run_dir, "{HOST}": host, "{PORT}": str(port),
                      "{REMOTE}": str(host != "127.0.0.1")}

            def fill(text: str) -> str:
                for key, value in values.items():
                    text = text.replace(key, value)
                return text

            out_env = {**env, **{k: fill(str(v)) for k, v in (spec.get("env") or {}).items()}}
            if gpus:
                out_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            return [fill(str(a)) for a in argv], out_env

        where = {"node_id": ray.get_runtime_context().get_node_id(), "ip": ip, "host": host, "port": port}
        argv = list(spec["argv"])
        if run_as is not None:
            started = self._start_as_account(argv, {}, None, run_as, prepare=prepare, cwd=work_dir)
            return {**where, **started}
        self._work_dir = tempfile.mkdtemp(prefix=f"det-task-{task_id[:8]}-")
        argv, env = prepare(self._work_dir, None, argv, self._base_env())
        try:
            proc = self._fork(argv, env, work_dir or self._work_dir, subprocess.DEVNULL, trial=True)
        except OSError as e:
            self._refuse(f"cannot start {argv[0]!r}: {e.strerror or e}")
        return {**where, "pid": proc.pid, "not_isolated": None}

    def _refuse(self, message: str) -> NoReturn:
        with self._cond:
            self._start_error = message
            self._exit_code = 127
            self._cond.notify_all()
        if self._work_dir:
            shutil.rmtree(self._work_dir, ignore_errors=True)
        raise RuntimeError(message)

    @staticmethod
    def _home(account: Any) -> str:
        """The account's home directory when it owns one on this node, else a spare one, private to it."""
        try:
            if account.home and os.stat(account.home).st_uid == account.uid:
                return str(account.home)
        except OSError:
            pass
        path = os.path.join(RUN_AS_ROOT, f".home-{account.uid}")
        os.makedirs(path, mode=0o700, exist_ok=True)
        if os.lstat(path).st_uid != account.uid:
            os.chown(path, account.uid, account.gid, follow_symlinks=False)
        return path

    def warm(self) -> bool:
        """Start this worker's harness-only fork server now, before its first run (a worker the resource manager
        makes ready when it starts), so that its first run forks from it too; whether the server is ready."""
        from determined.exec import forkserver

        if self._server is None:
            self._start_server(self._base_env())
        return self._server is not None and self._server.ready(forkserver.READY_TIMEOUT_S)

    def _spawn_warm(self, env: Dict[str, str], cwd: str, base: Dict[str, str]) -> Any:
        """The trial's process forked from this worker's fork server (started with the first run, which does not
        wait for it); None when the server is not ready or cannot take this environment."""
        from determined.exec import forkserver

        if self._server is None:
            self._start_server(base)
            return None
        server = self._server
        if not server.ready(0) or (forkserver.startup_variables(forkserver.HARNESS_ONLY, env)
                                   != forkserver.startup_variables(forkserver.HARNESS_ONLY, server.env)):
            return None
        proc = server.spawn(env, cwd)
        if proc is None:
            return None
        with self._cond:
            self._proc = proc
            self._readers = [self._reader("stdout", proc.stdout), self._reader("stderr", proc.stderr)]
        threading.Thread(target=lambda: self._exited(proc, proc.wait()), name="det-trial-process",
                         daemon=True).start()
        return proc

    def _start_server(self, base: Dict[str, str]) -> None:
        """Start the fork server from a thread that lives as long as this process (PR_SET_PDEATHSIG fires when
        the thread that forked it ends): it dies with the worker, and its children with it."""
        from determined.exec import forkserver

        with self._server_lock:
            if self._server is None:
                self._start_server_locked(base, forkserver)

    def _start_server_locked(self, base: Dict[str, str], forkserver: Any) -> None:
        started = threading.Event()

        def hold() -> None:
            try:
                self._server = forkserver.ForkServer(forkserver.HARNESS_ONLY, tempfile.gettempdir(), base,
                                                     preexec_fn=self._die_with_parent)
            except OSError:
                self._server = None
            started.set()
            if self._server is not None:
                threading.Event().wait()

        threading.Thread(target=hold, name="det-fork-server", daemon=True).start()
        started.wait()

    @staticmethod
    def _base_env() -> Dict[str, str]:
        """The node's environment through the same allow-list as the local resource manager's trials."""
        from determined.master.rm.trial_env import trial_environment

        return trial_environment(os.environ)

    def _fork(self, argv: List[str], env: Dict[str, str], cwd: str, stdin: int,
              trial: bool, popen: Optional[Dict[str, Any]] = None) -> "subprocess.Popen[bytes]":
        """Start a process (the trial's when `trial`, else a prestarted one) from a thread that lives as long
        as it: PR_SET_PDEATHSIG fires when the *thread* that forked the child ends."""
        result: Dict[str, Any] = {}
        started = threading.Event()

        def hold() -> None:
            try:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True, preexec_fn=self._die_with_parent, **(popen or {}),
                )
            except OSError as e:
                result["error"] = e
                started.set()
                return
            result["proc"] = proc
            if trial:
                with self._cond:
                    self._proc = proc
                    self._readers = [self._reader("stdout", proc.stdout), self._reader("stderr", proc.stderr)]
            started.set()
            self._exited(proc, proc.wait())

        threading.Thread(target=hold, name="det-trial-process", daemon=True).start()
        started.wait()
        if "error" in result:
            raise result["error"]
        return result["proc"]

    def _exited(self, proc: "subprocess.Popen[bytes]", code: int) -> None:
        with self._cond:
            mine = proc is self._proc
            readers = list(self._readers) if mine else []
            if not mine and proc is self._idle:  # a prestarted process that died while it waited
                self._idle = None
        if not mine:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            return
        for reader in readers:
            reader.join(timeout=5.0)
        if self._work_dir:  # the run's working directory on this node goes with its process
            shutil.rmtree(self._work_dir, ignore_errors=True)
        with self._cond:
            if proc is self._proc:
                self._exit_code = 128 - code if code < 0 else code
                self._cond.notify_all()

    def _take_prestarted(self, env: Dict[str, str], cwd: str) -> "Optional[subprocess.Popen[bytes]]":
        """The prestarted process, now running the harness with `env` in `cwd`; None when there is none."""
        with self._cond:
            proc, self._idle = self._idle, None
            if proc is None or proc.poll() is not None:
                return None
            self._proc = proc
            self._readers = [self._reader("stdout", proc.stdout), self._reader("stderr", proc.stderr)]
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"env": env, "cwd": cwd}).encode() + b"\n")
            proc.stdin.close()
        except OSError:  # it died just now: its exit (a kill) is this run's, which the master restarts
            pass
        return proc

    def _reader(self, stream: str, pipe: Optional[IO[bytes]]) -> threading.Thread:
        def read() -> None:
            from determined.master.rm.log_lines import DEFAULT_LINE_BYTES, capped_lines

            assert pipe is not None
            for line in capped_lines(pipe, DEFAULT_LINE_BYTES):  # a huge line never sits here whole
                with self._cond:
                    self._lines.append((time.time(), stream, line))
                    self._cond.notify_all()
            pipe.close()

        thread = threading.Thread(target=read, name=f"det-trial-{stream}", daemon=True)
        thread.start()
        return thread

    def drain(self, timeout: float, run: Optional[str] = None) -> Tuple[List[Line], Optional[int]]:
        """Wait up to `timeout` s for output; the lines so far and, once every line is out, the exit code.

        With `run` (an allocation id), only that run's output and exit count: a drain that arrives before its
        `start` (calls to a threaded actor may run in any order) waits for it rather than report the previous run.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while run is not None and self._run != run:
                left = deadline - time.monotonic()
                if left <= 0:
                    return [], None
                self._cond.wait(left)
            if not self._lines and self._exit_code is None:
                self._cond.wait(max(0.0, deadline - time.monotonic()))
            # Output came: linger a little for more of it and, above all, for the exit that often follows a
            # trial's last lines, so that the exit comes back with them instead of one drain (a scheduler tick)
            # later.
            linger = min(deadline, time.monotonic() + DRAIN_LINGER_S)
            while self._lines and self._exit_code is None and len(self._lines) < MAX_LINES_PER_DRAIN:
                left = linger - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            lines, self._lines = self._lines[:MAX_LINES_PER_DRAIN], self._lines[MAX_LINES_PER_DRAIN:]
            code = self._exit_code if not self._lines else None
        if code is not None and self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
        return lines, code

    def kill_group(self, signum: int = signal.SIGKILL) -> bool:
        """Send `signum` (SIGKILL; a script's run gets SIGTERM first) to the trial process's whole process group
        (its session); True when there was one."""
        proc = self._proc
        if proc is None:
            return False
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            return False
        return True


def isolation_problem() -> Dict[str, Any]:
    """On one node: {"ip", "problem"}: why runs that should run as their users' accounts in a sandbox are not
    isolated here (None: they are). Asked once per worker process (the bwrap probe takes a moment)."""
    if not _ISOLATION_PROBLEM:
        if os.geteuid() != 0:
            problem: Optional[str] = (
                f"the Ray worker runs as uid {os.geteuid()}, not root: trials run as that user, not as their users' "
                "OS accounts, without a sandbox (every user's trial can read the others' checkpoints and processes); "
                "start the Ray node as root")
        else:
            from determined.master.rm.sandbox import sandbox_problem

            why = sandbox_problem()
            problem = None if why is None else (
                f"{why}: trials run as their users' OS accounts but without a sandbox (they share /tmp and see the "
                "node's other processes, their setsid children may outlive them, bind_mounts have no effect, the "
                "master's data dir is as readable as its permissions allow there, and a trial can read the "
                "checkpoints of another experiment of the same account); install bubblewrap on the node")
        _ISOLATION_PROBLEM.append(problem)
    return {"ip": _node_ip(), "problem": _ISOLATION_PROBLEM[0]}


def check_shared_path(path: str, marker_name: str, expected: str) -> Dict[str, Any]:
    """On one node: whether `path` holds the master's marker file with `expected`, and is writable."""
    result: Dict[str, Any] = {"ip": _node_ip(), "sees_marker": False, "writable": False, "error": ""}
    try:
        with open(os.path.join(path, marker_name)) as f:
            result["sees_marker"] = f.read() == expected
    except OSError as e:
        result["error"] = f"{e.strerror or e}"
    if result["sees_marker"]:
        probe = os.path.join(path, f"{marker_name}.{socket.gethostname()}.{os.getpid()}")
        try:
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
            result["writable"] = True
        except OSError as e:
            result["error"] = f"cannot write there: {e.strerror or e}"
    return result
