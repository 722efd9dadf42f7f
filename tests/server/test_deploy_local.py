"""`det deploy local cluster-up|cluster-down`: `det master up` in the background, found by its pid file."""
import json
import os
import pathlib
import socket

import pytest

from tests import _postgres
from tests.client._cli import cli_fails, det

from ._server import server_db_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ended(pid: int) -> bool:
    """The process is gone, or has exited and waits for its new parent (init, after `det` left) to reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(_postgres.wanted(), reason="the command starts and stops a process: the SQLite stage covers it")
def test_cluster_up_and_down(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "cluster-data"
    port = str(_free_port())
    db = server_db_url()
    up = det("deploy", "local", "cluster-up", "--master-port", port, "--data-dir", str(data_dir),
             *(["--db", db] if db else []))
    pid_file = data_dir / "cluster.json"
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        url = f"http://127.0.0.1:{port}"
        assert f"Cluster up: master at {url}" in up.stdout and f"export DET_MASTER={url}" in up.stdout
        pid = json.loads(pid_file.read_text())["pid"]
        assert "No experiments" in det("-m", url, "experiment", "list", check=True).stdout
        cli_fails(det("deploy", "local", "cluster-up", "--master-port", port, "--data-dir", str(data_dir)),
                  "a cluster already runs", "cluster-down")
    finally:
        down = det("deploy", "local", "cluster-down", "--data-dir", str(data_dir))
    assert down.returncode == 0 and "Cluster down." in down.stdout, down.stdout + down.stderr
    assert not pid_file.exists()
    assert _ended(pid), f"the master (pid {pid}) still runs after cluster-down"
    assert "No cluster runs" in det("deploy", "local", "cluster-down", "--data-dir", str(data_dir)).stdout
