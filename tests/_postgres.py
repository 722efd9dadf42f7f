"""Throwaway PostgreSQL servers for the tests and benchmarks, and running the master tests on PostgreSQL.

`PostgresServer.start()` runs initdb into a temporary dir (as the `postgres` user when we are root) and
pg_ctl with `listen_addresses=127.0.0.1` on a free port; `stop()` ends it by its pid and removes the dir.

As a pytest plugin (`pytest -p tests._postgres`, or through tests/master/conftest.py) it gives:

* `postgres_server`: one server for the session; `postgres_db_url`: a fresh database on it per test;
* with `DET_TEST_DB=postgres`, every master of the run uses PostgreSQL: each data dir gets its own fresh
  database (a data dir that already holds a SQLite `determined.db` keeps it), so the same tests run on both.
  `det` processes a test starts cannot see this process's patch: `database_url_for_subprocesses(data_dir)`
  gives the URL of a data dir's database, which tests/conftest.py exports as DET_DB_URL for the test's own
  data dir (in this process that exported value is ignored: each data dir keeps its own database).
"""
import contextlib
import hashlib
import os
import pathlib
import pwd
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Set

import pytest

from determined.experimental.determined_import._throwaway import postgres_bin_dir

SUPERUSER = "postgres"
# What a connection attempt gets while the server restarts its backends after one of them crashed.
_RECOVERING = ("recovery mode", "starting up", "not yet accepting connections", "terminated abnormally",
               "closed the connection unexpectedly")



def available() -> bool:
    return postgres_bin_dir() is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server in a temporary directory, listening on 127.0.0.1 only."""

    def __init__(self, *, durable: bool = False) -> None:
        """`durable=False` turns fsync off (tests); the benchmark keeps PostgreSQL's durable defaults."""
        self.durable = durable
        self.port = 0
        self.dir = ""
        self.pid: Optional[int] = None
        self._lock = threading.Lock()
        self._databases: Dict[str, str] = {}

    def _as_owner(self, argv: List[str]) -> List[str]:
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            return ["runuser", "-u", SUPERUSER, "--", *argv]
        return argv

    def start(self) -> "PostgresServer":
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb); install it, e.g. apt-get install postgresql")
        self.dir = tempfile.mkdtemp(prefix="det-pg-")
        if os.geteuid() == 0:
            owner = pwd.getpwnam(SUPERUSER)
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        data = os.path.join(self.dir, "data")
        subprocess.run(self._as_owner([os.path.join(bin_dir, "initdb"), "-D", data, "-U", SUPERUSER, "-A", "trust",
                                       "-E", "UTF8", "--no-sync", "--locale=C"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        options = ["-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.dir}",
                   "-c max_connections=400", "-c shared_buffers=64MB"]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
                        # a few hundred throwaway databases: keep the WAL they leave on disk small
                        "-c wal_level=minimal", "-c max_wal_senders=0", "-c max_wal_size=64MB", "-c min_wal_size=32MB"]
        for _ in range(3):
            self.port = _free_port()
            result = subprocess.run(
                self._as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l", os.path.join(self.dir, "log"), "-w",
                                "-t", "60", "-o", " ".join(options + [f"-p {self.port}"]), "start"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if result.returncode == 0:
                with open(os.path.join(data, "postmaster.pid")) as f:
                    self.pid = int(f.readline())
                return self
        log = pathlib.Path(self.dir, "log")
        raise RuntimeError(f"PostgreSQL did not start: {result.stderr}\n{log.read_text() if log.exists() else ''}")

    @property
    def admin_url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _admin_connection(self, wait: float = 60.0) -> Any:
        """A superuser connection. While the server recovers from a crashed backend (`trouble()` tells why, and
        the run prints it), it waits for the recovery rather than fail every test that starts meanwhile."""
        import psycopg

        deadline = time.monotonic() + wait
        while True:
            try:
                return psycopg.connect(self.admin_url, autocommit=True)
            except psycopg.OperationalError as e:
                if not any(m in str(e) for m in _RECOVERING) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def create_database(self, name: str, wait: float = 60.0) -> str:
        """Create database `name` (once) and return its URL.

        A connection made just before the server notices a crashed backend is closed under it when the server
        restarts its backends: the attempt is made again (if the database got created before that, it is kept)."""
        import psycopg

        with self._lock:
            if name not in self._databases:
                deadline = time.monotonic() + wait
                while True:
                    try:
                        with self._admin_connection(wait) as conn:
                            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
                            if not exists:
                                # FILE_COPY (PostgreSQL 15+) copies the template's files, not all of them to the WAL
                                strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
                                conn.execute(f'CREATE DATABASE "{name}"{strategy}')
                        break
                    except psycopg.OperationalError as e:
                        if not any(m in str(e) for m in _RECOVERING) or time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
                self._databases[name] = self.url(name)
            return self._databases[name]

    def trouble(self) -> List[str]:
        """Lines of the server's log that say it crashed or ran out of something (a backend killed, a full disk)."""
        log = pathlib.Path(self.dir, "log") if self.dir else None
        if log is None or not log.exists():
            return []
        marks = ("PANIC", "terminated by signal", "was terminated", "No space left", "out of memory")
        return [line for line in log.read_text(errors="replace").splitlines() if any(m in line for m in marks)]

    def stop(self) -> None:
        """Fast shutdown by the server's pid, then remove its directory."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _alive(self.pid):
                time.sleep(0.05)
            if _alive(self.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            self.pid = None
        if self.dir:
            # by a process of its own: a run's server leaves a few GB in some 10^5 files, and removing them takes
            # longer than xdist waits for a worker to exit (10 s) before it kills it, which used to cut the removal
            # short and leave them behind (1-2 GB a worker, every run)
            subprocess.Popen(["rm", "-rf", "--", self.dir], start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.dir = ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---------------------------------------------------------------- pytest plugin

_server: Optional[PostgresServer] = None
_server_lock = threading.Lock()
_counter = 0


def shared_server() -> PostgresServer:
    """The session's server, started on first use and stopped when pytest ends."""
    global _server
    with _server_lock:
        if _server is None:
            _server = PostgresServer().start()
        return _server


def fresh_database_url() -> str:
    global _counter
    with _server_lock:
        _counter += 1
        name = f"det_test_{os.getpid()}_{_counter}"
    return shared_server().create_database(name)


def wanted() -> bool:
    """Whether this test run puts the masters on PostgreSQL (DET_TEST_DB=postgres)."""
    value = os.environ.get("DET_TEST_DB", "sqlite").strip().lower()
    if value not in ("sqlite", "postgres", "postgresql"):
        raise pytest.UsageError(f"DET_TEST_DB={value!r}: use sqlite (default) or postgres")
    return value != "sqlite"


def _database_of_data_dir(data_dir: "str | pathlib.Path") -> str:
    """A data dir's own PostgreSQL database; a data dir with a SQLite database keeps it."""
    path = pathlib.Path(data_dir).expanduser().resolve()
    if (path / "determined.db").exists():
        return f"sqlite:///{path / 'determined.db'}"
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:24]
    return shared_server().create_database(f"det_{digest}")


_active = False
_exported_urls: Set[str] = set()


def use_postgres_for_every_master() -> None:
    """Masters without an explicit database use one PostgreSQL database per data dir (in this process).

    A DET_DB_URL that `database_url_for_subprocesses` exported is meant for `det` processes started on that
    data dir; in this process it is ignored, so a master on another data dir still gets its own database.
    """
    global _active
    from determined.master.db import engine

    engine.default_db_url = _database_of_data_dir  # type: ignore[assignment]
    if not getattr(engine.resolve_db_url, "_det_test_postgres", False):  # pytest_configure may run twice
        resolve = engine.resolve_db_url

        def resolve_ignoring_exported(data_dir: "str | pathlib.Path", db_url: Optional[str] = None) -> str:
            if not db_url and is_exported(os.environ.get("DET_DB_URL")):
                db_url = _database_of_data_dir(data_dir)
            return resolve(data_dir, db_url)

        resolve_ignoring_exported._det_test_postgres = True  # type: ignore[attr-defined]
        engine.resolve_db_url = resolve_ignoring_exported  # type: ignore[assignment]
    _active = True


def is_exported(url: Optional[str]) -> bool:
    """Whether `url` is a DET_DB_URL that `database_url_for_subprocesses` gave (not one a test chose)."""
    return url in _exported_urls


def database_url_for_subprocesses(data_dir: "str | pathlib.Path") -> Optional[str]:
    """With the masters on PostgreSQL, the URL of `data_dir`'s database for the processes a test starts
    (export it as DET_DB_URL); None when this run's masters use SQLite."""
    if not _active:
        return None
    url = _database_of_data_dir(data_dir)
    _exported_urls.add(url)
    return url


def pytest_configure(config: pytest.Config) -> None:
    if wanted():
        if not available():
            raise pytest.UsageError("DET_TEST_DB=postgres needs PostgreSQL's initdb and pg_ctl (apt-get install postgresql)")
        use_postgres_for_every_master()


def pytest_terminal_summary(terminalreporter: "pytest.TerminalReporter") -> None:
    lines = _server.trouble() if _server is not None else []
    if lines:
        terminalreporter.section("PostgreSQL server log: trouble", red=True)
        for line in lines[-40:]:
            terminalreporter.line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def pytest_report_header(config: pytest.Config) -> str:
    return "master database: " + ("PostgreSQL (DET_TEST_DB=postgres)" if wanted() else "SQLite")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if not available():
        pytest.skip("PostgreSQL is not installed (no initdb)")
    yield shared_server()


@pytest.fixture
def postgres_db_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return fresh_database_url()
