import os
import pathlib
import signal
from typing import Any, Dict, List, Tuple

import pytest

from tests import _postgres

REPO = pathlib.Path(__file__).resolve().parent.parent

# The work units (modules, and the ONE_WORKER directories) that take 15 s or more on 2 workers (pytest --junitxml, the
# times of a unit's tests summed), longest first. `make test` runs the suite on 2 xdist workers, one unit at a time
# each (--dist loadscope): these start first, so that no worker is left with a long one while the other has finished
# (xdist's own order, most tests first, would leave few-test modules like test_fuzz.py or test_dsat_e2e.py for the end).
LONGEST_FIRST = [
    "tests/ray/test_ray_rm.py",  # two Ray clusters, one after the other (~6 min)
    "tests/ui/",  # one unit (ONE_WORKER), ~4.5 min
    "tests/estimator/test_estimator_e2e.py",
    "tests/e2e/test_cli_experiment.py",
    "tests/distributed/test_keras_distributed.py",
    "tests/dsat/test_dsat_e2e.py",
    "tests/deepspeed/test_deepspeed_trainer.py",
    "tests/keras/test_keras_e2e.py",
    "tests/estimator/test_boosted_trees.py",
    "tests/e2e/test_native.py",
    "tests/importer/test_import_determined.py",
    "tests/tasks/test_tasks.py",
    "tests/keras/test_keras_callback_038.py",
    "tests/server/test_durability.py",
    "tests/deepspeed/test_deepspeed_trial.py",
    "tests/distributed/test_estimator_distributed.py",
    "tests/master/test_fuzz.py",
    "tests/master/test_local_master.py",
    "tests/launch/test_script_experiments.py",
    "tests/batch_inference/test_torch_batch_process.py",
    "tests/distributed/test_ddp_training.py",
    "tests/transformers/test_hf_callback_038.py",
    "tests/keras/test_keras_trial_api.py",
    "tests/core/test_core_api_038.py",
    "tests/server/test_unmanaged_server.py",
    "tests/distributed/test_rm_and_restart.py",
    "tests/e2e/test_search_e2e.py",
]
# Directories run on one worker as one unit: their modules share session-scoped fixtures (tests/ui/conftest.py: a
# master with a finished and a running experiment, headless Chromium), which each worker would otherwise start.
ONE_WORKER = ("tests/ui/",)


def _unit(nodeid: str) -> str:
    """The work unit of a test under `--dist loadscope`: its module, or its ONE_WORKER directory."""
    module = nodeid.split("::", 1)[0]
    return next((d for d in ONE_WORKER if module.startswith(d)), module)


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's workers (and a run started in a script's background) ignore SIGINT, and the processes the
    tests start would inherit that: Ctrl-C sent to a `det` under test would be lost. Give this process Python's
    default, which a child resets to the system default when it starts."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Every master the suite starts, in-process or as a server, checks each answer against its route's model
    # (determined/master/api/contract.py): an undeclared field fails the test that met it.
    os.environ.setdefault("DET_API_CONTRACT", "1")
    # xdist's loadscope hands modules out by their number of tests, most first; the order set below is kept instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """The modules of LONGEST_FIRST first, in its order; then the others, those with the most tests first (xdist's
    own order: the few-test modules left for the end fill the gaps). Within a module the order stays."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    counts: Dict[str, int] = {}
    for item in items:
        counts[_unit(item.nodeid)] = counts.get(_unit(item.nodeid), 0) + 1

    def key(item: pytest.Item) -> Tuple[int, int]:
        unit = _unit(item.nodeid)
        return (rank[unit], 0) if unit in rank else (len(rank), -counts[unit])

    items.sort(key=key)  # stable: the tests of a module, and modules of one rank, keep their order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` with the ONE_WORKER directories as one unit each (every other module is its own)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return _Scheduling(config, log)


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


def pytest_unconfigure(config: pytest.Config) -> None:
    """The PostgreSQL server a test started through tests/_postgres.py (the importer's and the UI's tests use one in
    the SQLite stage too, where that module is imported, not loaded as a plugin): stopped by its pid and its
    directory removed, as the plugin does in the PostgreSQL stage. Stopping twice is harmless."""
    _postgres.pytest_unconfigure(config)
