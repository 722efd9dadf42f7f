"""Prestarted harness processes (determined.exec.prestart) and the local resource manager that uses them."""
import datetime
import logging
import os
import pathlib
import signal
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from determined.exec.prestart import PrestartPool
from determined.master.rm import LocalResourceManager, Slots
from tests.core._fake_master import TOKEN, FakeMaster

PROBE_SCRIPT = '''
import os
import sys

from determined import core

print("probe MARK=%s threads=%s dont_write_bytecode=%s" % (os.environ.get("MARK"), os.environ.get("OMP_NUM_THREADS"),
      sys.flags.dont_write_bytecode), flush=True)
with core.init() as ctx:
    for op in ctx.searcher.operations():
        ctx.train.report_validation_metrics(op.length, {"loss": 0.25})
        op.report_completed(0.25)
'''

HOLD_SCRIPT = '''
import subprocess
import time

child = subprocess.Popen(["sleep", "1000"])
print("child pid", child.pid, flush=True)
time.sleep(1000)
'''


def _wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def master(tmp_path: pathlib.Path) -> Iterator[FakeMaster]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "probe.py").write_text(PROBE_SCRIPT)
    (model / "hold.py").write_text(HOLD_SCRIPT)
    config = {
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True, "max_length": {"batches": 100}},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"},
        "internal": {"native": {"command": ["probe.py"]}},
    }
    fake = FakeMaster(config=config, hparams={}, model_dir=model).start()
    yield fake
    fake.stop()


def _base_env() -> Dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the re-execution test sets it for the trial only
    return env


def _trial_env(master: FakeMaster, **extra: str) -> Dict[str, str]:
    env = _base_env()
    env.update({"DET_MASTER": master.url, "DET_TRIAL_ID": "3", "DET_EXPERIMENT_ID": "5", "DET_ALLOCATION_ID": "3.1",
                "DET_SESSION_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def _pool(tmp_path: pathlib.Path, size: int) -> PrestartPool:
    return PrestartPool(size, str(tmp_path / "pool"), env=_base_env)


def test_prestarted_process_takes_on_the_trial_environment_and_runs_it(master: FakeMaster,
                                                                       tmp_path: pathlib.Path) -> None:
    master.ops = [{"length": 2}]
    pool = _pool(tmp_path, 1)
    try:
        assert pool.take(_trial_env(master), str(tmp_path)) is None  # nothing prestarted yet: start it yourself
        _wait_for(lambda: pool.idle() == 1, 30, "a prestarted process")
        time.sleep(1.0)  # let it finish its imports: it is then waiting on stdin
        # The variables come only now: the process learns them from the pool, not from its start.
        popen = pool.take(_trial_env(master, MARK="given-at-take", OMP_NUM_THREADS="3"), str(tmp_path))
        assert popen is not None
        out, err = popen.communicate(timeout=60)
        assert popen.returncode == 0, out.decode() + err.decode()
        assert b"probe MARK=given-at-take threads=3 dont_write_bytecode=0" in out
        assert b"trial 3 of experiment 5 starting" in out
        assert master.completed == [{"length": 2, "metric": 0.25}]
        assert master.bad_auth == 0
        # The pool starts a replacement: each process runs exactly one trial.
        replacement = _wait_for(lambda: pool.idle() == 1 and pool._idle[0], 30, "the pool to refill")
        assert replacement.pid != popen.pid
    finally:
        pool.close()


def test_startup_variables_that_differ_re_execute_a_fresh_harness(master: FakeMaster, tmp_path: pathlib.Path) -> None:
    master.ops = [{"length": 1}]
    pool = _pool(tmp_path, 1)
    try:
        pool.take(_trial_env(master), str(tmp_path))
        _wait_for(lambda: pool.idle() == 1, 30, "a prestarted process")
        # PYTHONDONTWRITEBYTECODE is read by the interpreter at start: only a re-executed process honours it.
        popen = pool.take(_trial_env(master, MARK="reexec", PYTHONDONTWRITEBYTECODE="1"), str(tmp_path))
        assert popen is not None
        out, err = popen.communicate(timeout=60)
        assert popen.returncode == 0, out.decode() + err.decode()
        assert b"probe MARK=reexec threads=" in out and b"dont_write_bytecode=1" in out
        assert master.completed == [{"length": 1, "metric": 0.25}]
    finally:
        pool.close()


def test_close_kills_the_idle_processes_and_a_closed_pool_gives_none(tmp_path: pathlib.Path) -> None:
    pool = _pool(tmp_path, 2)
    pool.take({}, str(tmp_path))
    _wait_for(lambda: pool.idle() == 2, 30, "two prestarted processes")
    pids = [p.pid for p in pool._idle]
    pool.close()
    assert pool.idle() == 0
    assert not any(_alive(pid) for pid in pids)
    assert pool.take({}, str(tmp_path)) is None


def _rm(tmp_path: pathlib.Path, prestart: Optional[int]) -> Tuple[LocalResourceManager, List[Tuple[int, str, str]]]:
    logs: List[Tuple[int, str, str]] = []

    def sink(trial_id: int, when: datetime.datetime, stream: str, line: str) -> None:
        logs.append((trial_id, stream, line))

    rm = LocalResourceManager(str(tmp_path / "work"), sink, slots=Slots(gpus=[], cpu_count=1), prestart=prestart)
    rm.warm = False  # these tests are about the prestart pool: no fork server (as with DET_FORK_SERVER=0)
    return rm, logs


def test_local_rm_runs_trials_in_prestarted_processes_and_wakes_on_exit(master: FakeMaster,
                                                                        tmp_path: pathlib.Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.master")
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path / "data"))
    rm, logs = _rm(tmp_path, 1)
    exited = threading.Event()
    rm.exit_listener = exited.set
    try:
        results = []
        for run in range(2):
            master.ops = [{"length": 1}]
            proc = rm.launch(trial_id=3, experiment_id=5, allocation_id=f"3.{run}", token=TOKEN, slots_needed=1,
                             master_url=master.url)
            assert exited.wait(60), "the exit listener was not called"
            exited.clear()
            results += _wait_for(rm.poll_exited, 10, "the run to be reaped")
            if run == 0:  # the first run starts cold; by the second one a process waits
                _wait_for(lambda: rm._pool is not None and rm._pool.idle() == 1, 30, "a prestarted process")
                time.sleep(1.0)
            assert proc.popen.returncode == 0
        assert results == [(3, "3.0", 0), (3, "3.1", 0)]
        assert len(master.completed) == 2
        probes = [line for _, _, line in logs if line.startswith("probe ")]
        flag = int(bool(os.environ.get("PYTHONDONTWRITEBYTECODE")))
        assert probes == [f"probe MARK=None threads={os.cpu_count() or 1} dont_write_bytecode={flag}"] * 2
        started = [r.getMessage() for r in caplog.records if "started run" in r.getMessage()]
        assert len(started) == 2 and "prestarted" not in started[0] and "prestarted" in started[1]
    finally:
        rm.kill_all()


def test_killing_a_prestarted_run_kills_its_process_group(master: FakeMaster, tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path / "data"))
    master.config["internal"] = {"native": {"command": ["hold.py"]}}
    rm, logs = _rm(tmp_path, 1)
    try:
        assert rm._pool is not None
        rm._pool.start()
        _wait_for(lambda: rm._pool is not None and rm._pool.idle() == 1, 30, "a prestarted process")
        proc = rm.launch(trial_id=3, experiment_id=5, allocation_id="3.1", token=TOKEN, slots_needed=1,
                         master_url=master.url)
        line = _wait_for(lambda: [ln for _, _, ln in logs if ln.startswith("child pid ")], 60, "the trial's child")
        child = int(line[0].split()[-1])
        assert _alive(child) and os.getpgid(child) == proc.popen.pid  # the run's own process group
        rm.kill("3.1")
        exits = _wait_for(rm.poll_exited, 30, "the killed run to be reaped")
        assert exits == [(3, "3.1", -signal.SIGKILL)]
        _wait_for(lambda: not _alive(child), 10, "the trial's child to die with its group")
    finally:
        rm.kill_all()


def test_prestart_size_comes_from_the_environment_with_a_clear_error(tmp_path: pathlib.Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_HARNESS_PRESTART", "0")
    rm, _ = _rm(tmp_path, prestart=None)
    assert rm._pool is None
    monkeypatch.setenv("DET_HARNESS_PRESTART", "many")
    with pytest.raises(ValueError, match="DET_HARNESS_PRESTART='many'.*an integer, 0 turns prestarting off"):
        _rm(tmp_path, prestart=None)
    monkeypatch.delenv("DET_HARNESS_PRESTART")
    rm, _ = _rm(tmp_path, prestart=None)
    assert rm._pool is not None and rm._pool.size == 1  # one per slot
    assert LocalResourceManager(str(tmp_path / "w2"), lambda *a: None, slots=Slots(gpus=[], cpu_count=1),
                                trial_command=["sleep", "1"])._pool is None  # only the harness is prestarted
