import os
import pathlib
import signal

import pytest

from tests import _postgres

REPO = pathlib.Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's workers (and a run started in a script's background) ignore SIGINT, and the processes the
    tests start would inherit that: Ctrl-C sent to a `det` under test would be lost. Give this process Python's
    default, which a child resets to the system default when it starts."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Every master the suite starts, in-process or as a server, checks each answer against its route's model
    # (determined/master/api/contract.py): an undeclared field fails the test that met it.
    os.environ.setdefault("DET_API_CONTRACT", "1")


@pytest.fixture(autouse=True)
def det_data_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Every test gets its own data dir, its own token cache (XDG_CONFIG_HOME), no configured master or user."""
    path = tmp_path / "det-data"
    monkeypatch.setenv("DET_DATA_DIR", str(path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for var in ("DET_MASTER", "DET_MASTER_ADDR", "DET_TRIAL_ID", "DET_SESSION_TOKEN", "DET_USER", "DET_TOKEN_LIFETIME",
                "DET_DB_URL", "COLUMNS", "LINES"):  # pytest-xdist's workers set COLUMNS=80: no terminal here
        monkeypatch.delenv(var, raising=False)
    # Under DET_TEST_DB=postgres the `det` processes a test starts use the same database as its in-process masters.
    db_url = _postgres.database_url_for_subprocesses(path)
    if db_url:
        monkeypatch.setenv("DET_DB_URL", db_url)
    return path
