"""The launcher and the framework-free collectives of determined.core (no torch involved)."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

import pytest

from determined import core, errors
from determined.core._distributed import TCPCollectives
from determined.exec import launch
from determined.core._distributed import check_global_batch_size

HERE = pathlib.Path(__file__).resolve().parent


def _launch(mode: str, nproc: int = 2, env: Dict[str, str] = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", str(nproc), "--",
         sys.executable, str(HERE / "_collectives_worker.py"), mode],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def _results(stdout: str) -> Dict[int, Dict[str, Any]]:
    rows = [json.loads(line.split("RESULT ", 1)[1]) for line in stdout.splitlines() if "RESULT " in line]
    return {row["rank"]: row for row in rows}


def test_ranks_environment_and_collectives() -> None:
    proc = _launch("ok", env={"OMP_NUM_THREADS": "4", "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr
    results = _results(proc.stdout)
    assert sorted(results) == [0, 1]
    for rank, row in results.items():
        assert row["env"] == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                              "DET_CROSS_SIZE": "1", "OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": ""}
        assert (row["size"], row["local_rank"], row["cross_size"]) == (2, rank, 1)
        assert row["allgather"] == [0, 10]
        assert row["broadcast"] == "from 0"
        assert row["ops"] == [3, 7]  # the chief's operations, broadcast to every rank
    assert results[0]["gather"] == [{"r": 0}, {"r": 1}] and results[1]["gather"] is None
    assert "[rank 1] RESULT " in proc.stdout


def test_a_failing_worker_takes_the_others_down() -> None:
    start = time.monotonic()
    proc = _launch("die")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert time.monotonic() - start < 30
    assert "rank 1 exited with status 3; stopping rank(s) [0]" in proc.stdout


def test_one_gpu_per_worker_and_thread_share() -> None:
    envs = launch.worker_envs(2, {"CUDA_VISIBLE_DEVICES": "3,5", "OMP_NUM_THREADS": "16"}, master_port=1234)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["3", "5"]
    assert [e["OMP_NUM_THREADS"] for e in envs] == ["8", "8"]
    assert {e["MASTER_PORT"] for e in envs} == {"1234"} and envs[0]["DET_CHIEF_PORT"] != "1234"
    with pytest.raises(ValueError, match="names 1 GPU"):
        launch.worker_envs(2, {"CUDA_VISIBLE_DEVICES": "0"})
    second_machine = launch.worker_envs(2, {}, cross_rank=1, cross_size=2, master_port=1, chief_port=2)
    assert [(e["RANK"], e["WORLD_SIZE"], e["GROUP_RANK"]) for e in second_machine] == [("2", "4", "1"), ("3", "4", "1")]


def _pair(timeout: float = 30.0) -> List[TCPCollectives]:
    port = launch.free_port()
    chief: List[TCPCollectives] = []
    thread = threading.Thread(target=lambda: chief.append(TCPCollectives(0, 2, "127.0.0.1", port, timeout)))
    thread.start()
    worker = TCPCollectives(1, 2, "127.0.0.1", port, timeout)
    thread.join()
    return [chief[0], worker]


def test_a_dead_peer_fails_the_collective_at_once() -> None:
    chief, worker = _pair()
    worker.close()  # what the kernel does when a rank dies
    start = time.monotonic()
    with pytest.raises(errors.DeterminedError, match="another process of this trial died"):
        chief.allgather("x")
    assert time.monotonic() - start < 5
    chief.close()


def test_a_silent_peer_fails_the_collective_after_the_timeout() -> None:
    chief, worker = _pair(timeout=0.5)
    with pytest.raises(errors.DeterminedError, match="did not answer within 0 s .*DET_COLLECTIVE_TIMEOUT_S"):
        chief.gather("x")
    chief.close()
    worker.close()


def test_from_env_without_a_launcher_is_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert core.DistributedContext.from_env().size == 1
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("DET_CHIEF_PORT", raising=False)
    with pytest.raises(errors.DeterminedError, match="DET_CHIEF_PORT is not set.*determined.exec.launch"):
        core.DistributedContext.from_env()


def test_global_batch_size_must_split_evenly() -> None:
    check_global_batch_size({"global_batch_size": 8}, 2)
    with pytest.raises(errors.InvalidTrialError, match=r"global_batch_size \(9\) must be a multiple of "
                                                       r"resources.slots_per_trial \(2\)"):
        check_global_batch_size({"global_batch_size": 9}, 2)
    with pytest.raises(errors.InvalidTrialError, match=r"global_batch_size \(2\).*slots_per_trial \(4\)"):
        check_global_batch_size({"global_batch_size": 2}, 4)
