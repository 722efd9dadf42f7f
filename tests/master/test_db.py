import pathlib

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from determined.master.db import Base, default_db_url, make_engine, upgrade


def test_migrations_build_exactly_the_models_and_sqlite_uses_wal(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    upgrade(engine)  # idempotent
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0001"
    engine.dispose()
