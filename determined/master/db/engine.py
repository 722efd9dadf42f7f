"""Opening the master's database: engine, SQLite pragmas, migrations applied on start."""
import contextlib
import fcntl
import os
import pathlib
import zlib
from typing import Any, Callable, Iterator, Optional

import sqlalchemy
from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError

MIGRATIONS_DIR = pathlib.Path(__file__).resolve().parent.parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# The key of the PostgreSQL advisory lock that masters starting at once on one database take turns on.
MIGRATION_LOCK_KEY = zlib.crc32(b"determined-master-migrations")


def default_db_url(data_dir: "str | pathlib.Path") -> str:
    """The SQLite database of a data dir: `<data_dir>/determined.db`."""
    return f"sqlite:///{pathlib.Path(data_dir) / 'determined.db'}"


def resolve_db_url(data_dir: "str | pathlib.Path", db_url: Optional[str] = None) -> str:
    """The database of a master: `db_url`, else $DET_DB_URL, else the data dir's SQLite file; normalised."""
    return normalize_db_url(db_url or os.environ.get("DET_DB_URL") or default_db_url(data_dir))


def normalize_db_url(url: str) -> str:
    """Check a database URL and pick the driver: `postgresql://` and `postgres://` use psycopg 3.

    Only SQLite and PostgreSQL are supported; anything else is refused with the accepted forms.
    """
    text_url = url.strip()
    for prefix in ("postgres://", "postgresql://"):
        if text_url.startswith(prefix):
            text_url = "postgresql+psycopg://" + text_url[len(prefix):]
    try:
        parsed = make_url(text_url)
    except ArgumentError:
        parsed = None
    if parsed is None or parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(
            f"unsupported database URL {url!r}; use postgresql://USER:PASSWORD@HOST:PORT/DATABASE "
            "or sqlite:///PATH/determined.db"
        )
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg":
        raise ValueError(f"database URL {url!r}: only the psycopg (3) driver is supported; "
                         "write postgresql://... or postgresql+psycopg://...")
    return text_url


def is_postgres(engine: Engine) -> bool:
    return engine.url.get_backend_name() == "postgresql"


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout and `BEGIN IMMEDIATE` for write transactions."""
    url = normalize_db_url(url)
    if not url.startswith("sqlite"):
        return sqlalchemy.create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=40)
    engine = sqlalchemy.create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun below, not by the driver
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # A write transaction takes the write lock up front, so it waits (busy timeout) instead of failing
        # when it upgrades from a stale read snapshot.
        immediate = connection.get_execution_options().get("sqlite_immediate", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def alembic_config(url: Optional[str] = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to `revision` (default: all) to the database of `engine` (a no-op when it is up to
    date; tests of a migration stop at the revision before it).

    Processes that open the same database at once (a starting master and a `det` command reading the data
    dir) take turns: the second finds the schema up to date instead of failing half way through creating it.
    SQLite files are guarded by a file lock next to them, PostgreSQL databases by an advisory lock.
    """
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    if is_postgres(engine):
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            connection.commit()
            try:
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, revision)
                connection.commit()
            finally:
                connection.rollback()
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
                connection.commit()
        return
    with _migration_lock(engine):
        with engine.connect() as connection:
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, revision)
            connection.commit()


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    database = engine.url.database if engine.url.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    lock_path = pathlib.Path(database).with_name(pathlib.Path(database).name + ".migrate-lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)


# The key of the PostgreSQL advisory lock a scheduling master holds on its database while it runs.
MASTER_LOCK_KEY = zlib.crc32(b"determined-master-running")


class DatabaseInUse(RuntimeError):
    """Another scheduling master already runs on this database."""


def hold_master_lock(engine: Engine) -> Callable[[], None]:
    """Take the database's master lock (one scheduling master per database) and return its release.

    PostgreSQL: a session advisory lock on a connection kept open for the master's life; SQLite: an
    exclusive file lock next to the database file. Both are released by the system when the master dies.
    """
    if is_postgres(engine):
        connection = engine.connect()
        got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": MASTER_LOCK_KEY}).scalar()
        connection.commit()
        if not got:
            connection.close()
            raise DatabaseInUse(f"another master already runs on the database {engine.url.render_as_string()}; "
                                "stop it first or give this master its own database (--db)")

        def release_pg() -> None:
            with contextlib.suppress(Exception):
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MASTER_LOCK_KEY})
                connection.commit()
            connection.close()

        return release_pg
    database = engine.url.database
    if not database or database == ":memory:":
        return lambda: None
    lock_file = open(pathlib.Path(database).with_name(pathlib.Path(database).name + ".master-lock"), "a")
    try:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        raise DatabaseInUse(f"another master already runs on the database {database}; stop it first") from None

    def release_file() -> None:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
        lock_file.close()

    return release_file
