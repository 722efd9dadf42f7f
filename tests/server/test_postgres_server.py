"""The suite's throwaway PostgreSQL server: a crashed backend makes the server restart the others, and the
tests that start meanwhile wait for it (and the run prints why) instead of failing one after another."""
import os
import signal
import time

import pytest

from tests import _postgres


@pytest.mark.skipif(not _postgres.available(), reason="PostgreSQL is not installed (no initdb)")
def test_a_database_asked_for_during_crash_recovery_is_created_and_the_crash_is_reported() -> None:
    import psycopg

    server = _postgres.PostgresServer().start()
    try:
        before = server.create_database("before")
        victim = psycopg.connect(server.admin_url, autocommit=True)
        os.kill(victim.info.backend_pid, signal.SIGKILL)
        # Once the server has noticed the crash it restarts every backend; a database asked for before it noticed
        # would be created before the crash, and the connection below could be the one the restart closes.
        deadline = time.monotonic() + 30
        while not any("terminated by signal 9" in line for line in server.trouble()):
            assert time.monotonic() < deadline, "the server never noticed its killed backend"
            time.sleep(0.01)
        after = server.create_database("after")  # connects while the server still recovers
        with psycopg.connect(after, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(before, autocommit=True) as conn:  # fsync is off: its last commits may be gone,
            assert conn.execute("SELECT 1").fetchone() == (1,)  # but the database serves again
        assert any("terminated by signal 9" in line for line in server.trouble())
    finally:
        server.stop()
