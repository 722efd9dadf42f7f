"""A killed script run on the Ray resource manager gets SIGTERM on its process groups, then SIGKILL after the
grace (as on the local resource manager); a Trial class run and the master's shutdown SIGKILL at once. No
cluster: the node-side worker runs a real process here, and the resource manager's decisions are driven with
stand-in actors."""
import signal
import sys
import time
from typing import Any, List, Tuple

import pytest

from determined.master.rm import _ray_worker, ray as ray_rm


def test_the_node_worker_signals_the_whole_process_group() -> None:
    worker = _ray_worker.RankWorker()
    script = ("import signal, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "signal.signal(signal.SIGTERM, lambda *_: print('got SIGTERM', flush=True))\n"
              "print('ready', flush=True)\ntime.sleep(60)\n")
    worker.start([sys.executable, "-c", script], {"DET_ALLOCATION_ID": "a1"})
    lines: List[str] = []
    deadline = time.monotonic() + 30
    code = None
    while "got SIGTERM" not in lines and time.monotonic() < deadline:
        out, code = worker.drain(1.0, "a1")
        lines += [line for _, _, line in out]
        if "ready" in lines and "got SIGTERM" not in lines:
            assert worker.kill_group(signal.SIGTERM)
    assert "got SIGTERM" in lines and code is None  # it handled SIGTERM and still runs
    assert worker.kill_group()  # SIGKILL
    while code is None and time.monotonic() < deadline:
        _, code = worker.drain(1.0, "a1")
    assert code == 128 + signal.SIGKILL


class _Actor:
    def __init__(self, sent: List[Tuple[int, int]], rank: int) -> None:
        self.kill_group = self
        self._sent, self._rank = sent, rank

    def remote(self, signum: int) -> str:
        self._sent.append((self._rank, signum))
        return f"kill-{self._rank}-{len(self._sent)}"


def _manager(monkeypatch: pytest.MonkeyPatch, script: bool) -> Tuple[Any, Any, List[Tuple[int, int]]]:
    monkeypatch.setattr(ray_rm, "TERM_GRACE_S", 0.3)
    rm: Any = object.__new__(ray_rm.RayResourceManager)
    rm._runs, rm._dead, rm._idle, rm._warming = {}, set(), [], []
    rm._placements, rm._disabled = {}, {}  # no resource pools of its own, no disabled node
    rm._ray = type("FakeRay", (), {"kill": staticmethod(lambda actor, no_restart: None)})
    rm._remove_placement_group = lambda pg: None
    sent: List[Tuple[int, int]] = []
    run = ray_rm.RayRun(1, 1, "a1", "t", 2, "http://m", None, script=script, state="running",
                        actors=[_Actor(sent, 0), _Actor(sent, 1)], rank_nodes=["n0", "n1"],
                        node_ips=["10.0.0.1", "10.0.0.2"])
    if script:
        run.exit_codes[1] = 0  # a one-container run: rank 1 holds its slot for rank 0's process
    rm._runs["a1"] = run
    return rm, run, sent


def test_a_killed_script_run_gets_sigterm_then_sigkill(monkeypatch: pytest.MonkeyPatch) -> None:
    rm, run, sent = _manager(monkeypatch, script=True)
    rm.kill("a1")
    assert sent == [(0, signal.SIGTERM)] and run.state == "stopping"
    rm._decide(run)
    assert sent == [(0, signal.SIGTERM)]  # within the grace
    time.sleep(0.35)
    rm._decide(run)
    assert sent == [(0, signal.SIGTERM), (0, signal.SIGKILL)] and run.exit_code is None
    run.exit_codes[0] = 137
    rm._decide(run)
    assert run.exit_code == 137


def test_trial_class_runs_and_shutdown_are_sigkilled(monkeypatch: pytest.MonkeyPatch) -> None:
    rm, run, sent = _manager(monkeypatch, script=False)
    rm.kill("a1")
    assert sent == [(0, signal.SIGKILL), (1, signal.SIGKILL)]
    rm, run, sent = _manager(monkeypatch, script=True)
    rm.kill_all()
    assert sent == [(0, signal.SIGKILL)]
