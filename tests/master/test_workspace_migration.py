"""Migration 0008: older experiments and models move into the default workspace and project ("Uncategorized",
id 1), and new workspaces and projects get the next ids (PostgreSQL's sequences too)."""
import datetime
import pathlib

from sqlalchemy import text
from sqlalchemy.orm import Session

from determined.master.db import Project, Workspace, default_db_url, make_engine, upgrade


def test_existing_rows_move_into_uncategorized(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine, "0007")
    now = datetime.datetime(2025, 1, 1)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO experiments (state, config, model_def, owner, searcher_shutdown, "
                          "searcher_failure, progress, start_time) VALUES ('COMPLETED', '{}', :b, 'determined', "
                          ":f, :f, 1.0, :now)"), {"b": b"", "f": False, "now": now})
        conn.execute(text("INSERT INTO models (name, description, metadata, creation_time, last_updated_time) "
                          "VALUES ('old', '', '{}', :now, :now)"), {"now": now})
    upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT project_id FROM experiments")).scalar() == 1
        assert conn.execute(text("SELECT workspace_id FROM models")).scalar() == 1
        row = conn.execute(text("SELECT w.name, p.name, w.immutable, p.immutable FROM projects p JOIN workspaces w "
                                "ON w.id = p.workspace_id WHERE p.id = 1")).one()
        assert tuple(row) == ("Uncategorized", "Uncategorized", True, True)
    with Session(engine) as s:
        ws = Workspace(name="next", owner="determined")
        s.add(ws)
        s.flush()
        project = Project(workspace_id=ws.id, name="next", owner="determined")
        s.add(project)
        s.flush()
        assert (ws.id, project.id) == (2, 2)
    engine.dispose()
