"""A master inside the current process: served on loopback, scheduling trials, guarded by a lock file."""
import contextlib
import json
import logging
import os
import pathlib
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Sequence

from determined import errors

if TYPE_CHECKING:  # the server stack is imported when a master starts (`start`, `in_process_session`), not here:
    # a command that only looks for the data dir's running master (every `det` read with `det master up` running)
    # must not pay for FastAPI, SQLAlchemy and uvicorn (benchmarks/cli_latency.py --running-master)
    import uvicorn

    from determined.common.api import Session
    from determined.master.lifecycle.logs import LogLimits
    from determined.master.master import Master
    from determined.master.rm import Slots
    from determined.master.rm.base import ResourceManagerFactory
    from determined.master.rm.trial_env import TrialUser
    from determined.master.scheduling.pools import ClusterPools

logger = logging.getLogger("determined.master")

LOCK_FILE = "master.lock"


def _lock_path(data_dir: "str | os.PathLike[str]") -> pathlib.Path:
    return pathlib.Path(data_dir).expanduser().resolve() / LOCK_FILE


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not a live master
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _read_lock(path: pathlib.Path) -> Optional[Dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _master_info(url: str, timeout: float = 2.0) -> Optional[Dict[str, Any]]:
    """What the master at `url` (a lock file's: plain HTTP on this machine) answers to GET /api/v1/master/info, or
    None when it does not answer. One HTTP/1.0 request on a socket: a `det` read command that only asks whether the
    data dir's master lives imports no HTTP client for it (httpx and http.client cost more than the question), and
    no proxy setting applies to loopback."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    request = (f"GET {parts.path.rstrip('/')}/api/v1/master/info HTTP/1.0\r\nHost: {parts.netloc}\r\n"
               "Accept: application/json\r\n\r\n").encode()
    try:
        # (the address as bytes: a str would load the IDNA codec, a few ms of a read command's start)
        host = parts.hostname.encode("idna") if not parts.hostname.isascii() else parts.hostname.encode()
        with socket.create_connection((host, parts.port or 80), timeout=timeout) as sock:  # type: ignore[arg-type]
            sock.sendall(request)
            chunks = []
            while True:  # an HTTP/1.0 answer ends when the server closes the connection
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].split()
        info = json.loads(body) if len(status) >= 2 and status[1] == b"200" else None
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def running_master_info(data_dir: "str | os.PathLike[str]", wait: float = 30.0) -> Optional[Dict[str, Any]]:
    """What the live master of `data_dir` says of itself (GET /master/info: version, data dir, slots, scheduler),
    with `url` its address from the lock file; None when no master lives. A lock file left by a dead master is
    removed."""
    path = _lock_path(data_dir)
    lock = _read_lock(path)
    if lock is None:
        return None
    pid = lock.get("pid")
    if not isinstance(pid, int) or not _pid_alive(pid):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None
    # A live master that is still starting (no URL yet, or not answering yet) gets a moment: falling back to
    # opening the database in-process while it migrates would race it.
    deadline = time.monotonic() + wait
    while True:
        url = lock.get("url")
        info = _master_info(url) if isinstance(url, str) and url else None
        if info is not None:
            return {**info, "url": url}
        if time.monotonic() > deadline or not _pid_alive(pid):
            return None
        time.sleep(0.1)
        lock = _read_lock(path) or {}


def running_master_url(data_dir: "str | os.PathLike[str]", wait: float = 30.0) -> Optional[str]:
    """The URL of the live master of `data_dir`, or None; a lock file left by a dead master is removed."""
    info = running_master_info(data_dir, wait)
    return None if info is None else str(info["url"])


FOLLOWERS_DIR = "followers"


@contextlib.contextmanager
def following(data_dir: "str | os.PathLike[str]", experiment_id: int) -> Iterator[None]:
    """Mark, while the block runs, that this process follows `experiment_id` on another process's foreground
    master and will run it itself when that master stops (a shared lock, released when this process dies)."""
    import fcntl

    folder = pathlib.Path(data_dir).expanduser().resolve() / FOLLOWERS_DIR
    folder.mkdir(exist_ok=True)
    fd = os.open(folder / f"{int(experiment_id)}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def has_follower(data_dir: "str | os.PathLike[str]", experiment_id: int) -> bool:
    """Whether a live process follows `experiment_id` (see `following`) and will take it over."""
    import fcntl

    path = pathlib.Path(data_dir).expanduser().resolve() / FOLLOWERS_DIR / f"{int(experiment_id)}.lock"
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def in_process_session(data_dir: "str | os.PathLike[str]") -> "Session":
    """A Session on the data dir's API served in-process (httpx's ASGI transport on a private event loop, the app's
    lifespan run), with no scheduler: for reading and recording. `session._client.app` is the app."""
    from determined.common.api import InProcessClient, Session
    from determined.master.app import create_app

    app = create_app(data_dir, run_scheduler=False)
    _recover_runs_of_a_dead_master(app.state.master)
    return Session("http://in-process", client=InProcessClient(app))


def _recover_runs_of_a_dead_master(master: "Master") -> None:
    """Runs recorded as live while no master runs the database have no process: a master that died without
    stopping them (SIGKILL, a crash) left them so. A scheduling master makes them ready to restart when it starts
    (allocations.recover); so does an app opened in-process, once it holds the database's master lock (no master
    runs it then, and none starts meanwhile). Else a kill of their experiment would wait for them for ever:
    STOPPING_CANCELED, with no end time (a duration that keeps growing)."""
    from sqlalchemy import select

    from determined.master.db import Trial
    from determined.master.db import engine as db_engine
    from determined.master.lifecycle import allocations

    with master.read() as s:  # (the common case, nothing recorded as running: one indexed look, no lock)
        if s.scalars(select(Trial.id).where(Trial.allocation_id.is_not(None)).limit(1)).first() is None:
            return
    try:
        release = db_engine.hold_master_lock(master.engine)
    except db_engine.DatabaseInUse:  # a master runs the database: the runs are its own
        return
    try:
        with master.write() as s:
            recovered = allocations.recover(s)
        if recovered:
            logger.info("%s run(s) left by a master that died are recorded as stopped", recovered)
    finally:
        release()


class EmbeddedMaster:
    """A running master; use `start()` to create one, or it as a context manager."""

    def __init__(self, data_dir: pathlib.Path, master: "Master", server: Any, thread: threading.Thread,
                 url: str, lock_path: pathlib.Path) -> None:
        self.data_dir = data_dir
        self.master = master
        self.url = url
        self._server = server
        self._thread = thread
        self._lock_path = lock_path
        self._stopped = False

    def session(self) -> "Session":
        """A Session talking to this master over HTTP."""
        from determined.common.api import Session

        return Session(self.url)

    def stop(self, timeout: float = 60.0) -> None:
        """Preempt running trials so they checkpoint (up to `timeout` s), kill leftovers, stop serving, unlock."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.master.stop(timeout=timeout)
        finally:
            self._server.exit_soon()
            self._thread.join(timeout=30)
            with contextlib.suppress(FileNotFoundError):
                if (_read_lock(self._lock_path) or {}).get("pid") == os.getpid():
                    self._lock_path.unlink()

    def __enter__(self) -> "EmbeddedMaster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _server(config: "uvicorn.Config") -> Any:
    """A uvicorn server whose `exit_soon()` (from another thread) ends its main loop at once rather than at its next
    tick (every 0.1 s): a `det` command that ran the master ends that much sooner. (The class is made here, where
    uvicorn is imported: see the imports.)"""
    import asyncio

    import uvicorn

    class _Server(uvicorn.Server):

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self._loop: Optional[asyncio.AbstractEventLoop] = None
            self._woken: Optional[asyncio.Event] = None

        async def main_loop(self) -> None:
            self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + 1) % 864000
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), 0.1)
                should_exit = await self.on_tick(counter)

        def exit_soon(self) -> None:
            self.should_exit = True
            loop, woken = self._loop, self._woken
            if loop is not None and woken is not None:
                with contextlib.suppress(RuntimeError):  # the loop has ended already
                    loop.call_soon_threadsafe(woken.set)

    return _Server(config)


class MasterAlreadyRunning(errors.DeterminedError):
    """Another live process is the master of the data dir."""


def _take_lock(path: pathlib.Path) -> None:
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            lock = _read_lock(path) or {}
            pid = lock.get("pid")
            if isinstance(pid, int) and _pid_alive(pid):
                raise MasterAlreadyRunning(
                    f"another master (pid {pid}) already runs on the data dir {path.parent} at "
                    f"{lock.get('url') or '(starting)'}; talk to it with DET_MASTER={lock.get('url')} or stop it first"
                ) from None
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"url": "", "pid": os.getpid()}, f)
        return
    raise errors.DeterminedError(f"could not take the master lock {path}; remove it if no master runs")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response written in two parts must not wait 40 ms for a delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise errors.DeterminedError(f"cannot listen on {host}:{port} ({e.strerror or e}); "
                                     "choose another address with --host/--port (--port 0: any free port)") from None
    return sock


def _reachable_host(host: str) -> str:
    """The address trial processes and local commands use to reach a master listening on `host`."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def start(
    data_dir: "str | os.PathLike[str]",
    *,
    db_url: Optional[str] = None,
    slots: Optional["Slots"] = None,
    trial_command: Optional[Sequence[str]] = None,
    preemption_timeout: Optional[float] = None,
    startup_timeout: float = 30.0,
    host: str = "127.0.0.1",
    port: int = 0,
    warn_blank_passwords: bool = False,
    resource_manager: Optional["ResourceManagerFactory"] = None,
    allowed_hosts: Sequence[str] = (),
    storage_roots: Optional[Sequence[str]] = None,
    trial_user: Optional["TrialUser"] = None,
    log_limits: Optional["LogLimits"] = None,
    storage_endpoints: Optional[Sequence[str]] = None,
    resource_pools: Optional["ClusterPools"] = None,
) -> EmbeddedMaster:
    """Start a master for `data_dir` in this process: migrations, API on `host`:`port` (0: a free port), scheduler.

    Experiments left ACTIVE in the database resume. `trial_command` replaces the harness (tests only);
    `resource_manager` builds the resource manager from (work root, log sink) (default: the local one).
    It answers only requests for its own host names, plus `allowed_hosts` (web_security.allowed_hosts).
    `storage_roots`, `storage_endpoints`, `trial_user`, `log_limits` and `resource_pools`: a server's settings
    (`det master up`, see `Master`).
    """
    import uvicorn

    from determined.master.api import proxy_lane
    from determined.master.app import create_app
    from determined.master.security import connection_limits, web_security

    root = pathlib.Path(data_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    lock_path = _lock_path(root)
    _take_lock(lock_path)
    try:
        sock = _listen(host, port)
        url = f"http://{_reachable_host(host)}:{sock.getsockname()[1]}"
        app = create_app(root, db_url, run_scheduler=True, url=url, slots=slots, trial_command=trial_command,
                         preemption_timeout=preemption_timeout, warn_blank_passwords=warn_blank_passwords,
                         resource_manager=resource_manager,
                         allowed_hosts=web_security.allowed_hosts(host, allowed_hosts), storage_roots=storage_roots,
                         trial_user=trial_user, log_limits=log_limits, storage_endpoints=storage_endpoints,
                         resource_pools=resource_pools)
        master: "Master" = app.state.master
        options = connection_limits.server_options()  # capped connections, also per address
        options["http"] = proxy_lane.front_protocol(options["http"], connection_limits.caps())  # plain proxied requests
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5,
                                **options)
        server = _server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="determined-master-http",
                                  daemon=True)
        thread.start()
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise errors.DeterminedError(f"the embedded master did not start serving on {url}")
            time.sleep(0.02)
        lock_path.write_text(json.dumps({"url": url, "pid": os.getpid()}))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            lock_path.unlink()
        raise
    logger.info("master for %s serving at %s", root, url)
    return EmbeddedMaster(root, master, server, thread, url, lock_path)
