"""Warm trial processes: a fork server per framework that has imported the harness and the framework once.

Importing a framework (torch: seconds on a busy machine) is most of a small trial's start. A `ForkServer` is a
process (`python -m determined.exec.forkserver FRAMEWORK FD`) that imports the harness and the framework, then
forks one child per trial it is asked for. The child takes on the trial's environment, working directory,
output pipes and a session of its own, and from then on is the process `python -m determined.exec.harness` would
have been: the same program, the same environment (os.environ), cwd and OS user (the server runs as the trials'
user), unseeded random generators reseeded from the OS as in a fresh process, its own exit status.

Every 1-process run of one slot starts in a server. A Trial class whose framework has a server (see `framework_of`
in determined/common/framework_scan.py) starts in that framework's; every other run (a Native API command, a script
entrypoint, a TensorFlow Trial class, one whose framework is not read from its source) in the `HARNESS_ONLY`
server, which has imported the harness alone: its child imports what the run needs itself, after the fork, as a
process started cold would. So a trial never runs in a server of another framework. A server imports a framework
but never initialises CUDA: a GPU is set up in each child, after the fork, as in a cold process (the server checks
`torch.cuda.is_initialized()` is False, else it refuses to serve). Variables read while the interpreter starts or
the server's imports run (`startup_variables`) must have the server's values; a trial whose values differ starts
elsewhere.

    server = ForkServer("torch", cwd=work_root, env=env)
    proc = server.spawn(env, work_dir)     # a running harness (Popen-like: pid, stdout, stderr, poll, wait)
    server.close()

The protocol, over a SOCK_SEQPACKET socket pair: the client sends `{"env": {...}, "cwd": "..."}` with the write
ends of the child's stdout and stderr pipes attached (SCM_RIGHTS); the server answers `{"pid": N}`, and later
`{"exited": N, "code": C}` (C as `Popen.returncode`: negative for a signal). The server sends `{"ready": true}`
once its imports are done, and exits when the socket closes.
"""
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from determined.exec._import_time_variables import IMPORT_TIME_PREFIXES, PER_TRIAL_NAMES

logger = logging.getLogger("determined.master")

SERVER_COMMAND = (sys.executable, "-m", "determined.exec.forkserver")
# What each framework's server imports (beyond the harness): the framework and this platform's layer over it.
# TensorFlow has none: its import starts runtime threads, and forking it is unsupported (its trials start cold).
FRAMEWORK_IMPORTS: Dict[str, Tuple[str, ...]] = {
    "torch": ("torch", "determined.pytorch"),
}
# The server of every other 1-slot run: it imports the harness only (forking it costs a millisecond where starting
# a process and importing the harness costs a quarter of a CPU second).
HARNESS_ONLY = "harness"
SERVERS: Tuple[str, ...] = (*FRAMEWORK_IMPORTS, HARNESS_ONLY)
READY_TIMEOUT_S = 180.0
# How long after handing a child its trial the server forks the next child in advance.
REFORK_AFTER_S = 0.25
_MAX_MESSAGE = 8 * 2**20


def _without_per_trial(env: Mapping[str, str]) -> Dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("DET_") and k not in PER_TRIAL_NAMES}


def import_time_variables(env: Mapping[str, str]) -> Dict[str, str]:
    """The variables of `env` that must match between a framework's fork server and a trial it starts."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES) and k not in PER_TRIAL_NAMES}


def startup_variables(server: str, env: Mapping[str, str]) -> Dict[str, str]:
    """The variables of `env` that must match between the fork server `server` and a trial it starts: the
    interpreter's for the harness-only server (as for a prestarted process), those a framework's import reads too
    for a framework's."""
    if server == HARNESS_ONLY:
        return {k: v for k, v in env.items() if k.startswith(("PYTHON", "LD_"))}
    return import_time_variables(env)


def server_for(framework: Optional[str]) -> str:
    """The fork server a 1-slot run of a Trial class of `framework` (None: not a Trial class, or not known) starts
    in: its framework's when it has one, else the harness-only server."""
    return framework if framework in FRAMEWORK_IMPORTS else HARNESS_ONLY


class ForkedProcess:
    """A child of a fork server, seen like a `subprocess.Popen`: pid, stdout, stderr, poll(), wait()."""

    def __init__(self, pid: int, stdout: Any, stderr: Any) -> None:
        self.pid = pid
        self.stdin = None
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: Optional[int] = None
        self._exited = threading.Event()

    def _set_exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
        self._exited.set()

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked process {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """A `python -m determined.exec.forkserver FRAMEWORK` process started with `env` in `cwd` (as the OS user of
    `popen_kwargs`, if any), and the thread that reads its answers."""

    def __init__(self, framework: str, cwd: str, env: Mapping[str, str], *,
                 preexec_fn: Optional[Callable[[], None]] = None,
                 popen_kwargs: Optional[Mapping[str, Any]] = None) -> None:
        if framework not in SERVERS:
            raise ValueError(f"no fork server for framework {framework!r}; known: {sorted(SERVERS)}")
        self.framework = framework
        self.env = dict(env)
        self.popen_kwargs = dict(popen_kwargs or {})
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.makedirs(cwd, exist_ok=True)
        try:
            self.popen = subprocess.Popen(
                [*SERVER_COMMAND, framework, str(theirs.fileno())], pass_fds=[theirs.fileno()], cwd=cwd,
                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, preexec_fn=preexec_fn, **self.popen_kwargs)
        finally:
            theirs.close()
        self._lock = threading.Lock()  # one request at a time: answers with a pid come in request order
        self._pid_answers: List[int] = []
        self._answered = threading.Condition()
        self._children: Dict[int, ForkedProcess] = {}
        self._early_exits: Dict[int, int] = {}
        self._ready = threading.Event()
        self._dead = threading.Event()
        self._preloaded: Set[str] = set()
        threading.Thread(target=self._read_answers, name=f"forkserver-{framework}", daemon=True).start()
        threading.Thread(target=self._read_stderr, name=f"forkserver-{framework}-stderr", daemon=True).start()

    # ------------------------------------------------------------ client side

    def ready(self, timeout: Optional[float] = None) -> bool:
        """Whether the server has imported its framework (waits up to `timeout` s for it); False once it died."""
        if self._dead.is_set():
            return False
        self._ready.wait(timeout)
        return self._ready.is_set() and not self._dead.is_set()

    def alive(self) -> bool:
        return not self._dead.is_set()

    def preload(self, modules: Sequence[str]) -> None:
        """Have the server import `modules` (those it has not tried yet) before it forks the next child: the
        model's own imports from outside its directory (framework_scan.TrialImports.modules)."""
        wanted = [m for m in modules if m not in self._preloaded]
        if not wanted or self._dead.is_set():
            return
        self._preloaded.update(wanted)
        try:
            with self._lock:
                self._sock.send(json.dumps({"preload": wanted}).encode())
        except OSError as e:
            logger.warning("the %s fork server did not take the modules to import (%s)", self.framework, e)

    def spawn(self, env: Mapping[str, str], cwd: str, preload: Sequence[str] = ()) -> Optional[ForkedProcess]:
        """A child now running the harness with `env` in `cwd`; None when the server is not ready or died (start
        the trial cold). `preload`: modules to import first, when `env` is the server's but for the variables
        set for each trial (DET_*, CUDA_VISIBLE_DEVICES), so that they are imported as the trial would."""
        if not self.ready(0):
            return None
        if preload and _without_per_trial(env) == _without_per_trial(self.env):
            self.preload(preload)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        message = json.dumps({"env": dict(env), "cwd": cwd}).encode()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._sock, [message], [out_w, err_w])
                finally:
                    os.close(out_w)
                    os.close(err_w)
                pid = self._next_pid()
        except (OSError, _ServerGone) as e:
            os.close(out_r)
            os.close(err_r)
            logger.warning("the %s fork server could not start a trial (%s); starting it cold", self.framework, e)
            return None
        child = ForkedProcess(pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))
        with self._answered:
            self._children[pid] = child
            early = self._early_exits.pop(pid, None)
        if early is not None:
            child._set_exit(early)
        return child

    def close(self) -> None:
        """End the server (the children it started live on until they exit; their exits are no longer seen)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.popen.wait()
        self._dead.wait(5.0)

    def _next_pid(self) -> int:
        with self._answered:
            while not self._pid_answers:
                if self._dead.is_set():
                    raise _ServerGone("it exited")
                self._answered.wait(1.0)
            return self._pid_answers.pop(0)

    def _read_answers(self) -> None:
        try:
            while True:
                data = self._sock.recv(_MAX_MESSAGE)
                if not data:
                    break
                answer = json.loads(data)
                with self._answered:
                    if "pid" in answer:
                        self._pid_answers.append(int(answer["pid"]))
                    elif "exited" in answer:
                        pid, code = int(answer["exited"]), int(answer["code"])
                        child = self._children.pop(pid, None)
                        if child is None:
                            self._early_exits[pid] = code
                        else:
                            child._set_exit(code)
                    elif answer.get("ready"):
                        self._ready.set()
                    self._answered.notify_all()
        except (OSError, ValueError) as e:
            logger.warning("the %s fork server's answers stopped: %s", self.framework, e)
        finally:
            self._dead.set()
            self._ready.set()
            with self._answered:
                orphans, self._children = list(self._children.values()), {}
                self._answered.notify_all()
            for child in orphans:  # their exits are lost with the server: end them and report a kill
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                child._set_exit(-signal.SIGKILL)
            self._sock.close()

    def _read_stderr(self) -> None:
        assert self.popen.stderr is not None
        for raw in self.popen.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            logger.warning("%s fork server: %s", self.framework, line)
        self.popen.stderr.close()


class _ServerGone(Exception):
    pass


# Servers started before the master that will use them (the CLI starts one while the embedded master starts).
_PREWARMED: Dict[str, ForkServer] = {}
_PREWARMED_LOCK = threading.Lock()


def prewarm(framework: str, cwd: str, env: Mapping[str, str], preload: Sequence[str] = ()) -> Optional[ForkServer]:
    """Start the fork server of `framework` (or `HARNESS_ONLY`) now (and have it import `preload`), for a resource
    manager of this process to adopt (`take_prewarmed`) if it would start one with the same environment; None for
    a framework without one."""
    if framework not in SERVERS:
        return None
    from determined.common._process import die_with_parent

    with _PREWARMED_LOCK:
        if framework not in _PREWARMED:
            _PREWARMED[framework] = ForkServer(framework, cwd, env, preexec_fn=die_with_parent)
        server = _PREWARMED[framework]
    server.preload(preload)
    return server


def take_prewarmed(framework: str, env: Mapping[str, str],
                   popen_kwargs: Optional[Mapping[str, Any]] = None) -> Optional[ForkServer]:
    """The prewarmed server of `framework` if it started with `env` and as this process's user; else None (one
    that does not fit is closed)."""
    with _PREWARMED_LOCK:
        server = _PREWARMED.pop(framework, None)
    if server is None:
        return None
    if server.env == dict(env) and server.popen_kwargs == dict(popen_kwargs or {}) and server.alive():
        return server
    server.close()
    return None


# ------------------------------------------------------------ server side (the process)

class _Child(Exception):
    """Raised in a forked child to leave the server's loop with the trial's assignment."""

    def __init__(self, assignment: Dict[str, Any]) -> None:
        super().__init__()
        self.assignment = assignment


def _import_framework(framework: str) -> None:
    import importlib

    for name in FRAMEWORK_IMPORTS.get(framework, ()):
        importlib.import_module(name)
    if framework == "torch":
        import torch

        if torch.cuda.is_initialized():
            raise RuntimeError("CUDA was initialised while importing torch; a fork server must not fork it")
        _warm_torch(torch)


def _warm_torch(torch: Any) -> None:
    """Pay, once in the server, what torch imports only on first use and nearly every trial uses: building any
    optimizer imports its compiler stack (`torch._dynamo`, about a second). It computes nothing (no thread pool
    starts), draws no random numbers and leaves CUDA alone."""
    before = dict(os.environ)
    try:
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    except Exception:  # noqa: BLE001 -- a torch without it: the trial pays the import itself, as a cold one would
        logger.debug("optimizer warm-up failed", exc_info=True)
    # What those imports put in os.environ (TORCHINDUCTOR_CACHE_DIR) is not passed on to trials: a cold trial has it
    # only once it builds an optimizer, and torch sets it again whenever it uses it.
    for name in [n for n in os.environ if n not in before]:
        del os.environ[name]
    os.environ.update({k: v for k, v in before.items() if os.environ.get(k) != v})


def _cuda_initialised(framework: str) -> bool:
    if framework == "torch":
        import torch

        return bool(torch.cuda.is_initialized())
    return False


def _send(sock: socket.socket, answer: Dict[str, Any]) -> None:
    sock.send(json.dumps(answer).encode())


class _Ready:
    """A child forked in advance that waits for its trial: a request then costs a message instead of a fork (whose
    copy-on-write faults and wait for a CPU were most of a warm start's latency on a busy machine)."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock


def _leave_server(sock: socket.socket, wake_fds: List[int]) -> None:
    """In a child: drop the server's signal handling, its wake-up pipe and its socket."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in wake_fds:
        os.close(fd)
    sock.close()


def _fork_ready(sock: socket.socket, wake_fds: List[int]) -> _Ready:
    """Fork a child that waits on a socket of its own for its assignment (message and pipes, as the server gets
    them); in the child, raises `_Child` with the assignment, or exits when the server drops it (empty message)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        _leave_server(sock, wake_fds)
        ours.close()
        _detach()
        message, fds, _, _ = socket.recv_fds(theirs, _MAX_MESSAGE, 2)
        theirs.close()
        if not message:
            os._exit(0)
        _take_pipes(fds)
        raise _Child(json.loads(message))
    theirs.close()
    return _Ready(pid, ours)


def _serve(framework: str, sock: socket.socket) -> None:
    """Answer requests until the socket closes; raises `_Child` in each forked child. One child waits, forked in
    advance, for the next request; it is forked again after a `preload` (so that it has those modules too)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    wake_fds = [wake_r, wake_w]
    dropped: Set[int] = set()  # children forked in advance and never used: their exits are nobody's business
    ready: Optional[_Ready] = None

    def drop_ready() -> None:
        nonlocal ready
        if ready is not None:
            dropped.add(ready.pid)
            ready.sock.close()  # the child reads an empty message and exits
            ready = None

    _send(sock, {"ready": True})
    handed_off = float("-inf")  # when the last child was handed its trial (time.monotonic())
    while True:
        timeout = None
        if ready is None and not _cuda_initialised(framework):
            # Not at once after a handoff: the fork would compete with that trial's start for the CPU.
            wait = handed_off + REFORK_AFTER_S - time.monotonic()
            if wait <= 0:
                ready = _fork_ready(sock, wake_fds)
            else:
                timeout = wait
        readable, _, _ = select.select([sock, wake_r], [], [], timeout)
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            _reap(sock, dropped)
        if sock not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 2)
        if not message:
            drop_ready()
            return
        request = json.loads(message)
        if "preload" in request:
            _preload(request["preload"])
            drop_ready()
            continue
        if _cuda_initialised(framework):  # never fork a process with CUDA state
            for fd in fds:
                os.close(fd)
            drop_ready()
            raise RuntimeError("CUDA was initialised in the fork server; it stops (trials start cold)")
        pid = None
        if ready is not None:
            try:
                socket.send_fds(ready.sock, [message], fds)
                pid = ready.pid
            except OSError:  # it died while it waited (killed from outside): fork one now
                dropped.add(ready.pid)
            ready.sock.close()
            ready = None
        if pid is None:
            pid = os.fork()
            if pid == 0:
                _leave_server(sock, wake_fds)
                _detach()
                _take_pipes(fds)
                raise _Child(request)
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})
        handed_off = time.monotonic()


# The server's environment before its imports (they may change os.environ).
_STARTED_ENV: Dict[str, str] = {}


def _preload(modules: List[str]) -> None:
    """Import the model's modules from outside its directory; one that fails is left to the trial (which then
    fails, or not, as a cold process would)."""
    import gc
    import importlib

    for name in modules:
        try:
            importlib.import_module(str(name))
        except BaseException:  # noqa: B036 -- a module's import may raise anything; the trial meets it itself
            continue
    gc.freeze()


def _reap(sock: socket.socket, dropped: Set[int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in dropped:
            dropped.discard(pid)
            continue
        _send(sock, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _detach() -> None:
    """A session of its own (as a process started cold), and death with the server (which dies with the master)."""
    os.setsid()
    from determined.common._process import die_with_parent

    die_with_parent()


def _take_pipes(fds: List[int]) -> None:
    """stdin /dev/null, stdout and stderr the trial's pipes: as a process started cold."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    out, err = fds
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    sys.stdin = open(0, closefd=False)


def _reseed() -> None:
    """Generators seeded from the OS at import get fresh seeds, as in a process started cold (`random` reseeds
    itself after a fork): numpy's global one and torch's default CPU generator (CUDA's are made after the fork)."""
    if "numpy" in sys.modules:
        import numpy

        numpy.random.seed()
    if "torch" in sys.modules:
        import torch

        torch.default_generator.seed()


def main(argv: Optional[List[str]] = None) -> int:
    import gc

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in SERVERS or not args[1].isdigit():
        print(f"usage: python -m determined.exec.forkserver {{{','.join(SERVERS)}}} FD", file=sys.stderr)
        return 2
    framework, fd = args[0], int(args[1])
    _STARTED_ENV.update(os.environ)
    sock = socket.socket(fileno=fd)
    from determined.exec import harness

    harness.make_http_client().close()  # builds the process's shared TLS context once
    _import_framework(framework)
    gc.freeze()  # what was imported lives as long as the process (and every child): keep collections off it
    try:
        _serve(framework, sock)
    except _Child as child:
        return _run_child(framework, child.assignment)
    return 0


def _run_child(framework: str, assignment: Dict[str, Any]) -> int:
    from determined.exec import _environment, harness
    from determined.exec.prestart import _become

    _reseed()
    env = assignment.get("env")
    if isinstance(env, dict) and startup_variables(framework, env) != startup_variables(framework, _STARTED_ENV):
        # read when this process started or imported the framework: only a cold process gets them right
        os.chdir(str(assignment.get("cwd") or "."))
        os.execve(harness_command()[0], harness_command(), {str(k): str(v) for k, v in env.items()})
    # What the imports did to os.environ (scikit-learn sets KMP_* defaults, say), done again over the trial's
    # environment, as the same imports would have done in a cold process.
    effects = {k: v for k, v in os.environ.items() if _STARTED_ENV.get(k) != v}
    removed = [k for k in _STARTED_ENV if k not in os.environ]
    if framework != HARNESS_ONLY:
        _environment.PRELOADED_FRAMEWORK = framework
    _become(assignment)
    trial_env = dict(env) if isinstance(env, dict) else {}
    for k, v in effects.items():
        if trial_env.get(k) == _STARTED_ENV.get(k):
            os.environ[k] = v
    for k in removed:
        if trial_env.get(k) == _STARTED_ENV.get(k):
            os.environ.pop(k, None)
    return harness.main()


def harness_command() -> List[str]:
    return [sys.executable, "-m", "determined.exec.harness"]


if __name__ == "__main__":
    from determined.common._exit import exit_process

    exit_process(main())
