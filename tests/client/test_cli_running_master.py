"""`det`'s read commands with a master running on the data dir and DET_MASTER unset (what `det master up` users
have): they talk to it over HTTP as they do with DET_MASTER set, and import nothing of the server stack (the
embedded master's module included), so they start as fast (benchmarks/cli_latency.py --running-master)."""
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

from determined.master import embedded
from tests.master._helpers import model_def

SERVER_STACK = ("fastapi", "sqlalchemy", "alembic", "starlette", "uvicorn", "determined.master.app",
                "determined.master.master", "determined.master.api", "determined.master.db")

PROBE = ("import sys, io, contextlib\nfrom determined.cli.main import main\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out):\n"
         "    try:\n        code = main(sys.argv[1:])\n    except SystemExit as e:\n        code = e.code\n"
         "print(out.getvalue())\n"
         f"print('CODE', code, sorted(m for m in {SERVER_STACK!r} if m in sys.modules))")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("running-master") / "data"
    session = embedded.in_process_session(data_dir)
    config = {"entrypoint": "model:T", "description": "read through the running master", "max_restarts": 0,
              "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
              "hyperparameters": {"global_batch_size": 8}}
    exp = session.post("/experiments", {"config": config, "model_definition": model_def()})["experiment"]["id"]
    session.post(f"/experiments/{exp}/pause")
    trial = session.get(f"/experiments/{exp}")["trials"][0]["id"]
    session._client.app.state.master.stop()
    master = embedded.start(data_dir)
    try:
        yield {"data_dir": data_dir, "experiment": exp, "trial": trial, "url": master.url}
    finally:
        master.stop()


def _probe(data_dir: pathlib.Path, *argv: str) -> str:
    env = {**os.environ, "DET_DATA_DIR": str(data_dir), "COLUMNS": "120"}
    for key in ("DET_MASTER", "DET_MASTER_ADDR", "DET_DB_URL", "DET_USER"):
        env.pop(key, None)
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_read_commands_use_the_running_master_without_importing_the_server_stack(running: Dict[str, Any]) -> None:
    exp, trial = str(running["experiment"]), str(running["trial"])
    for argv in (["experiment", "list"], ["experiment", "describe", exp], ["trial", "describe", trial],
                 ["trial", "logs", trial], ["model", "list"]):
        out = _probe(running["data_dir"], *argv)
        assert out.strip().splitlines()[-1] == "CODE 0 []", (argv, out)
    listing = _probe(running["data_dir"], "experiment", "list")
    assert "read through the running master" in listing and "PAUSED" in listing, listing


def test_writes_go_to_the_running_master_and_its_info_is_the_masters(running: Dict[str, Any]) -> None:
    """What is not a read goes to the running master over HTTP (never an in-process app beside it), and the flag
    "no master runs" is not shown: one does."""
    out = _probe(running["data_dir"], "experiment", "label", "add", str(running["experiment"]), "seen-by-master")
    assert out.strip().splitlines()[-1] == "CODE 0 []", out
    from determined.common.api import Session

    labels = Session(running["url"]).get(f"/experiments/{running['experiment']}")["experiment"]["config"]["labels"]
    assert "seen-by-master" in labels
    probe = ("from determined.experimental import _connect\n"
             "print(_connect.Connection().session.get('/master/info'))")
    env = {**os.environ, "DET_DATA_DIR": str(running["data_dir"])}
    env.pop("DET_MASTER", None)
    info = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert f"'url': '{running['url']}'" in info.stdout and "'scheduler': True" in info.stdout, info.stdout + info.stderr


def test_the_lock_file_of_a_dead_master_is_still_removed_without_the_server_stack(tmp_path: pathlib.Path) -> None:
    """The light lookup of the running master (no server stack) still cleans up after a master that died."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (data_dir / "master.lock").write_text('{"url": "http://127.0.0.1:9", "pid": %d}' % int(dead.stdout))
    probe = ("import sys\nfrom determined.master import embedded\n"
             "print(embedded.running_master_url(sys.argv[1]))\n"
             f"print(sorted(m for m in {SERVER_STACK!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe, str(data_dir)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split("\n")[:2] == ["None", "[]"], proc.stdout + proc.stderr
    assert not (data_dir / "master.lock").exists()
