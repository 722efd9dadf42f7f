"""Which master a client talks to, and over which transport (see ARCHITECTURE.md, "One engine, three scales").

`Connection` is the one place that decides it, for the client SDK, the CLI, the experiment runners and unmanaged
runs alike. It lives here rather than under `determined.experimental.client` so that a read command of the CLI
imports neither the SDK's object model nor the HTTP client: `det experiment list` reads the data dir's database
directly (determined/master/views/local_reads.py).
"""
import contextlib
import dataclasses
import os
import signal
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union

from determined import common

# How long a command waits for the data dir's master to change hands (another command's foreground master
# stopping, or two commands starting one at once).
TAKEOVER_TIMEOUT_S = 120.0
LOCK_FILE = "master.lock"  # determined.master.embedded.LOCK_FILE


def configured_master(master: Optional[str] = None) -> Optional[str]:
    """An explicit master URL: the argument, then $DET_MASTER, then $DET_MASTER_ADDR."""
    return master or os.environ.get("DET_MASTER") or os.environ.get("DET_MASTER_ADDR") or None


@dataclasses.dataclass
class Foreground:
    """The master a command that runs work in the foreground works with (`Connection.foreground`): `master` when
    this process runs it (an EmbeddedMaster), else None (a configured master, or one another process runs)."""

    session: Any
    master: Optional[Any] = None


class Connection:
    """The session to a master, decided once (and shared by every SDK object of one `Determined`).

    The transport, in order:
      1. an explicit master: `master`, else $DET_MASTER, else $DET_MASTER_ADDR (unless `local`): HTTP;
      2. the master running on the local data dir (its lock file, `embedded.running_master_info`): with
         `local_reads` and no user asked for by name, its data dir's SQLite database read directly and what is not
         a read sent to it over HTTP (`_reads_beside`: the CLI's fast path whatever master runs); else HTTP;
      3. with `local_reads` and no user asked for by name (`user`, $DET_USER): the data dir's SQLite database read
         directly, what is not a read going to the master's app in-process (local_reads.open_local: the CLI's fast
         path);
      4. the master's app in-process (determined.master.embedded.in_process_session), with no background loops.
    The session authenticates by itself as `user` (default: $DET_USER, else the last `det user login`, else
    `determined`; see determined.common.api.Session). `cert_path` (a CA bundle) and `noverify` are for an https
    master. `session`: a session to use as it is (until `for_work` replaces it).

    What makes work run (creating or activating an experiment) uses `for_work()`: with no master configured or
    running on the data dir, this process becomes it (an embedded master in the background, stopped at `close()` or
    when the process exits; running trials checkpoint then, and their experiments resume when a master next runs
    on the data dir). A command that runs work in the foreground uses `foreground()` instead.
    """

    def __init__(self, master: Optional[str] = None, user: Optional[str] = None, session: Any = None, *,
                 local: bool = False, local_reads: bool = True, cert_path: Optional[str] = None,
                 noverify: bool = False) -> None:
        self.master = "" if local else (configured_master(master) or "")
        self.user = user
        self._session = session
        self._local_reads = local_reads
        self._verify: Union[None, bool, str] = False if noverify else (str(cert_path) if cert_path else None)
        self._embedded: Any = None

    # ------------------------------------------------------------ reading and recording

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = self._open()
        return self._session

    def _open(self) -> Any:
        if self.master:
            return self.http(self.master)
        data_dir = common.data_dir()
        # (a user asked for by name is authenticated by a master's app, never by reading the file)
        local_reads_ok = self._local_reads and self.user is None and not os.environ.get("DET_USER")
        if (data_dir / LOCK_FILE).exists():  # (looked at before importing the master: the CLI's read latency)
            from determined.master import embedded  # (light: the server stack is imported when a master starts)

            running = embedded.running_master_info(data_dir)
            if running:
                url = str(running["url"])
                local = _reads_beside(data_dir, running, lambda: self.http(url)) if local_reads_ok else None
                return local if local is not None else self.http(url)
        if local_reads_ok:
            from determined.master.views import local_reads

            local = local_reads.open_local(data_dir)
            if local is not None:
                return local
        from determined.master import embedded

        session = embedded.in_process_session(data_dir)
        session.user = self.user
        return session

    def http(self, url: str, *, retries: Optional[int] = None) -> Any:
        """A Session over HTTP to `url`, as this connection's user, with its TLS settings."""
        from determined.common.api import Session, http_client, make_url

        kwargs: Any = {}
        if retries is not None:
            kwargs["retries"] = retries
        if self._verify is not None:
            kwargs["client"] = http_client(base_url=make_url(url), verify=self._verify, timeout=60.0)
        return Session(url, user=self.user, **kwargs)

    # ------------------------------------------------------------ running work

    def _data_dir_master(self) -> Tuple[str, Any]:
        """The URL of the master running on the data dir and None; or, with none running, this process becomes it:
        its URL and the EmbeddedMaster. Waits up to TAKEOVER_TIMEOUT_S while another process is becoming it."""
        from determined.master import embedded

        data_dir = common.data_dir()
        deadline = time.monotonic() + TAKEOVER_TIMEOUT_S
        while True:
            url = embedded.running_master_url(data_dir)
            if url:
                return url, None
            try:
                master = embedded.start(data_dir)
                return master.url, master
            except embedded.MasterAlreadyRunning:  # another command became the master first: use it
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def for_work(self) -> Any:
        """The session for what makes work run: the configured master, the data dir's running master, or this
        process as the data dir's master in the background (see the class docstring)."""
        if self.master or self._embedded is not None:
            return self.session
        url, master = self._data_dir_master()
        if master is not None:
            import atexit

            self._embedded = master
            atexit.register(self.close)
        self._session = self.http(url)
        return self._session

    @contextlib.contextmanager
    def foreground(self, on_running: Any = None) -> Iterator[Foreground]:
        """For a command that runs work in the foreground: the configured master; else the master running on the
        data dir (`on_running(url)` is called, and its session retries little: a master that stops is taken over at
        once); else this process becomes the data dir's master for the life of the block, and stops it at the end
        (running trials checkpoint first; Ctrl-C and SIGTERM are ignored meanwhile)."""
        if self.master:
            yield Foreground(self.session)
            return
        url, master = self._data_dir_master()
        if master is None:
            if on_running is not None:
                on_running(url)
            yield Foreground(self.http(url, retries=2))
            return
        try:
            yield Foreground(self.http(url), master)
        finally:
            # (SIGTERM too: a command that follows its experiment handles it as Ctrl-C, determined/experimental/_run.py)
            previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                for sig in previous:
                    signal.signal(sig, signal.SIG_IGN)
                master.stop()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    def close(self) -> None:
        """Stop the master this connection started with `for_work`, if any (its running trials checkpoint first)."""
        master, self._embedded = self._embedded, None
        if master is not None:
            self._session = None
            master.stop()


def _reads_beside(data_dir: Any, info: Dict[str, Any], open_http: Callable[[], Any]) -> Any:
    """The CLI's fast path beside a running master (`det master up`, another command's foreground master): the read
    routes are answered from the data dir's SQLite file, as with no master running (the same reader the master's
    routes call; the master commits every change before it answers, so the file is what it would answer), and
    everything else (writes, other routes, login) goes to the running master over HTTP (`open_http()`, made on
    first use). `/master/info` is what that master said of itself when it was found. None where the file cannot
    be read directly (PostgreSQL, another schema): then everything goes over HTTP."""
    from determined.master.views import local_reads

    local = local_reads.open_local(data_dir)
    if local is None:
        return None

    class ReadsBesideMaster(local_reads.LocalSession):
        def _app(self) -> Any:
            if self._app_session is None:
                self._app_session = open_http()
            return self._app_session

        def _read(self, path: str, params: Optional[Dict[str, Any]]) -> Tuple[bool, Any]:
            if path in ("/master/info", "/api/v1/master/info"):
                return True, dict(info)
            return super()._read(path, params)

    session = ReadsBesideMaster(local.data_dir, local.reader.connection)
    session.master = str(info["url"])
    return session


def read_session(master: Optional[str] = None, user: Optional[str] = None) -> Any:
    """A session for commands that only read or record: `Connection(master, user).session` (the CLI's helpers)."""
    return Connection(master, user).session
