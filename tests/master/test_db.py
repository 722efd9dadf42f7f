import pathlib
import subprocess
import sys

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from determined.master.db import Base, default_db_url, make_engine, upgrade
from determined.master.db.engine import alembic_config


def test_migrations_build_exactly_the_models_and_sqlite_uses_wal(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    upgrade(engine)  # idempotent
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head
    engine.dispose()


_UPGRADE = ("import sys; from determined.master.db import default_db_url, make_engine, upgrade; "
            "engine = make_engine(default_db_url(sys.argv[1])); upgrade(engine); engine.dispose()")


def test_processes_opening_a_new_data_dir_at_once_all_succeed(tmp_path: pathlib.Path) -> None:
    # A starting master and `det` commands reading the same fresh data dir migrate it at the same time. Real
    # processes (not forks of this one, whose other threads may hold locks a fork would copy held).
    for attempt in range(4):
        data_dir = tmp_path / f"d{attempt}"
        data_dir.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", _UPGRADE, str(data_dir)], stderr=subprocess.PIPE)
                 for _ in range(3)]
        for p in procs:
            p.wait(120)
        assert [p.returncode for p in procs] == [0, 0, 0], [p.stderr.read().decode()[-2000:] for p in procs]
