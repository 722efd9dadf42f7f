"""Opening the master's database: engine, SQLite pragmas, migrations applied on start."""
import contextlib
import fcntl
import pathlib
from typing import Any, Iterator, Optional

import sqlalchemy
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine

MIGRATIONS_DIR = pathlib.Path(__file__).resolve().parent.parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def default_db_url(data_dir: "str | pathlib.Path") -> str:
    """The SQLite database of a data dir: `<data_dir>/determined.db`."""
    return f"sqlite:///{pathlib.Path(data_dir) / 'determined.db'}"


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, a busy timeout and `BEGIN IMMEDIATE` for write transactions."""
    if not url.startswith("sqlite"):
        return sqlalchemy.create_engine(url, pool_pre_ping=True)
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


def upgrade(engine: Engine) -> None:
    """Apply every migration to the database of `engine` (a no-op when it is up to date).

    Processes that open the same SQLite file at once (a starting master and a `det` command reading the data
    dir) take turns: the second finds the schema up to date instead of failing half way through creating it.
    """
    cfg = alembic_config(str(engine.url))
    with _migration_lock(engine):
        with engine.connect() as connection:
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
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
