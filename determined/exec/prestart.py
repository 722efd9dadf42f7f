"""Prestarted harness processes: a trial's process that has already started Python and imported the harness.

Starting a trial process costs an interpreter start and the harness's imports (a few tenths of a second on a
busy machine), paid between one trial's end and the next one's start. A `PrestartPool` keeps a few processes
that have paid it in advance and wait on stdin; `take(env, cwd)` hands one its trial's environment and working
directory, and from then on it is exactly the process `python -m determined.exec.harness` would have been:
same program, its own session (process group), output on its own pipes. Each prestarted process runs exactly
one trial, then exits; the pool's thread starts a replacement right away, so the fork and the imports happen
while other trials run, not between two trials.

    pool = PrestartPool(size=2, cwd=work_root)
    popen = pool.take(env, work_dir)                  # a running harness, or None: start one yourself
    pool.close()                                      # kills the idle ones, ends the pool's thread

The process side is `python -m determined.exec.prestart`: it imports the harness, reads one JSON line
`{"env": {...}, "cwd": "..."}` from stdin, then takes on that environment and runs the harness. When the
variables Python reads at its own start (PYTHON*) differ from the ones it was started with, it re-executes
itself as a fresh `python -m determined.exec.harness` with that environment instead (same pid, same pipes).
"""
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

logger = logging.getLogger("determined.master")

# The command of a trial process that is not prestarted (and of the re-execution fallback).
HARNESS_COMMAND = (sys.executable, "-m", "determined.exec.harness")
PRESTART_COMMAND = (sys.executable, "-m", "determined.exec.prestart")
RETRY_AFTER_FAILURE_S = 5.0


def _startup_variables(env: Mapping[str, str]) -> Dict[str, str]:
    """The environment variables the interpreter reads while it starts (module search path, flags, I/O)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class PrestartPool:
    """Up to `size` idle harness processes started in `cwd` with the environment `env()`, one per trial.

    The processes are started by the pool's own thread, so that a launch never waits for a fork: it starts
    on the first `take` and ends on `close`. `popen_kwargs` go to every `subprocess.Popen` (the OS user the
    trials run as, say). A process started with a `preexec_fn` that sets
    PR_SET_PDEATHSIG dies when the thread that forked it ends, so the processes handed out die at `close`
    too: close the pool when they are gone (or being killed).
    """

    def __init__(self, size: int, cwd: str, *, env: Optional[Callable[[], Mapping[str, str]]] = None,
                 preexec_fn: Optional[Callable[[], None]] = None,
                 command: Optional[List[str]] = None, popen_kwargs: Optional[Mapping[str, Any]] = None) -> None:
        if size < 0:
            raise ValueError(f"a prestart pool holds 0 or more processes, got {size}")
        self.size = size
        self.cwd = cwd
        self.env = env or (lambda: os.environ)  # read at each start, so a refill sees today's environment
        self.preexec_fn = preexec_fn
        self.command = list(command or PRESTART_COMMAND)
        self.popen_kwargs = dict(popen_kwargs or {})  # e.g. the user a trial runs as (user, group, extra_groups)
        self._idle: List["subprocess.Popen[bytes]"] = []
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self._thread: Optional[threading.Thread] = None

    def idle(self) -> int:
        """How many processes wait for a trial (some may still be importing)."""
        with self._lock:
            return len(self._idle)

    def take(self, env: Mapping[str, str], cwd: str) -> "Optional[subprocess.Popen[bytes]]":
        """A process now running the harness with `env` in `cwd`, or None when none is idle (start one
        yourself); the pool's thread starts a replacement."""
        if self._closed or self.size == 0:
            return None
        self.start()
        popen: "Optional[subprocess.Popen[bytes]]" = None
        while popen is None:
            with self._lock:
                candidate = self._idle.pop(0) if self._idle else None
            if candidate is None:
                break
            if candidate.poll() is not None:  # died while idle (killed from outside): not usable
                self._discard(candidate)
                continue
            try:
                assert candidate.stdin is not None
                candidate.stdin.write(json.dumps({"env": dict(env), "cwd": cwd}).encode() + b"\n")
                candidate.stdin.close()
                candidate.stdin = None  # like a process started with its stdin elsewhere
            except OSError:  # it died between the poll and the write
                self._discard(candidate)
                continue
            popen = candidate
        self._wanted.set()
        return popen

    def start(self) -> None:
        """Start the pool's thread, which starts processes until `size` are idle (`take` calls it)."""
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._run, name="determined-prestart", daemon=True)
            self._thread.start()
        self._wanted.set()

    def close(self) -> None:
        """Kill the idle processes and end the pool's thread."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        self._wanted.set()
        for popen in idle:
            self._discard(popen)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._closed:
                return
            try:
                self._fill()
            except Exception as e:  # this thread must live on: the processes it started die with it
                logger.warning("could not prestart a harness process (%s); retrying in %.0f s", e,
                               RETRY_AFTER_FAILURE_S)
                self._wanted.wait(RETRY_AFTER_FAILURE_S)
                self._wanted.set()

    def _fill(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                dead = [p for p in self._idle if p.poll() is not None]  # killed from outside while idle
                self._idle = [p for p in self._idle if p not in dead]
                missing = self.size - len(self._idle)
            for popen in dead:
                self._discard(popen)
            if missing <= 0:
                return
            os.makedirs(self.cwd, exist_ok=True)
            popen = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=dict(self.env()),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
                **self.popen_kwargs,
            )
            with self._lock:
                if not self._closed:
                    self._idle.append(popen)
                    continue
            self._discard(popen)
            return

    @staticmethod
    def _discard(popen: "subprocess.Popen[bytes]") -> None:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        popen.wait()
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


# Variables an HTTP client reads when it is built (proxies, CA certificates): a client built in advance is used
# only when the trial's values are the same.
_CLIENT_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


def _client_variables(env: Mapping[str, str]) -> Dict[str, str]:
    return {k: v for k, v in env.items() if k.upper() in _CLIENT_VARIABLES}


def _become(assignment: Mapping[str, object]) -> None:
    """Take on the trial's environment and working directory, as if started with them."""
    env = assignment.get("env")
    cwd = assignment.get("cwd")
    if not isinstance(env, dict) or not isinstance(cwd, str):
        raise ValueError(f"a prestarted harness expects {{'env': {{...}}, 'cwd': '...'}}, got {assignment!r}")
    env = {str(k): str(v) for k, v in env.items()}
    if _startup_variables(env) != _startup_variables(os.environ):
        os.chdir(cwd)
        os.execve(HARNESS_COMMAND[0], list(HARNESS_COMMAND), env)
    previous_tz = os.environ.get("TZ")
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if env.get("TZ") != previous_tz:
        import time

        time.tzset()
    # `python -m determined.exec.harness` would have the working directory first on sys.path
    sys.path[0] = cwd
    from determined.exec import harness

    sys.argv = [harness.__file__ or "harness.py"]


def main() -> int:
    import gc

    from determined.exec import harness  # the imports this process exists to pay in advance

    # The harness's HTTP client, built now: building one costs tens of milliseconds (its TLS context).
    client_env = _client_variables(os.environ)
    client = harness.make_http_client()
    # What was imported lives as long as the process: keep the garbage collector off it, during the trial and
    # at exit (the final collections over it were a tenth of a second of every trial's end).
    gc.freeze()
    line = sys.stdin.buffer.readline()
    if not line.strip():  # the pool was closed (or the master died) before a trial came
        return 0
    devnull = os.open(os.devnull, os.O_RDONLY)  # a trial process has stdin on /dev/null
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, closefd=False)
    _become(json.loads(line))
    if _client_variables(os.environ) != client_env:
        client.close()
        return harness.main()
    return harness.main(client=client)


if __name__ == "__main__":
    from determined.common._exit import exit_process

    exit_process(main())
