"""Migration 0003 on a database that already holds experiments: default users, owners, the archived mark."""
import datetime
import pathlib

from sqlalchemy import text

from determined.master.db import default_db_url, make_engine, upgrade


def test_0003_seeds_users_and_gives_old_experiments_their_owner(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine, "0002")
    now = datetime.datetime(2024, 1, 1)
    with engine.begin() as conn:
        for eid, owner in ((1, "determined"), (2, "someone-gone")):
            conn.execute(text("INSERT INTO experiments (id, state, config, model_def, owner, searcher_shutdown, "
                              "searcher_failure, progress, start_time) VALUES (:id, 'COMPLETED', '{}', x'00', :owner, "
                              "1, 0, 1.0, :now)"), {"id": eid, "owner": owner, "now": now})
        conn.execute(text("INSERT INTO trials (id, experiment_id, request_id, hparams, seed, state, restarts, "
                          "total_batches, runs, preempt_requested, close_requested, start_time) VALUES "
                          "(1, 1, 'r', '{}', 1, 'COMPLETED', 0, 0, 1, 0, 1, :now)"), {"now": now})
    upgrade(engine)
    with engine.connect() as conn:
        users = conn.execute(text("SELECT id, username, admin, active, password_hash FROM users ORDER BY id")).all()
        assert [(u.username, bool(u.admin), bool(u.active), u.password_hash) for u in users] == [
            ("admin", True, True, ""), ("determined", False, True, "")]
        rows = conn.execute(text("SELECT id, owner_id, archived FROM experiments ORDER BY id")).all()
        assert [(r.id, r.owner_id, bool(r.archived)) for r in rows] == [(1, users[1].id, False), (2, None, False)]
        assert conn.execute(text("SELECT count(*) FROM trials")).scalar() == 1
    engine.dispose()
