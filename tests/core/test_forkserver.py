"""Warm trial starts (determined/exec/forkserver.py): a trial forked from a fork server (torch's, or the harness-only one) behaves as a cold one.

One local resource manager and one torch fork server serve the whole module (the server's torch import is the
expensive part); the probe trial imports torch, and its controller prints what a process can observe of itself.
"""
import datetime
import json
import logging
import os
import pathlib
import re
import signal
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from determined.common.framework_scan import TrialImports, framework_of_archive, framework_of_directory, scan_directory
from determined.exec import _environment, forkserver
from determined.master.rm import LocalResourceManager, Slots
from tests.core._fake_master import TOKEN, FakeMaster, pack_dir
from tests.core.test_prestart import _alive, _wait_for

PROBE_MODEL = '''
import sys

WARM = "torch" in sys.modules  # imported by the fork server, or not yet (a cold process)
DYNAMO = "torch._dynamo" in sys.modules  # what the first optimizer imports: the server paid it in advance

import atexit
import json
import logging
import os
import random

import numpy as np
import threadpoolctl  # sets a KMP_* default in os.environ when imported, as some libraries do
import torch

import determined as det


_LEFT_OPEN = []


class ProbeController(det.TrialController):
    def run(self):
        cwd = os.getcwd()
        probe = {
            "env": dict(os.environ), "cwd": cwd, "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
            "random": random.random(), "numpy": float(np.random.random()),  # seeded by the harness: the trial seed
            "threads": torch.get_num_threads(), "cuda": torch.cuda.is_initialized(),
            "own_session": os.getsid(0) == os.getpid(), "stdin": os.path.realpath("/proc/self/fd/0"),
            "sys_path": sys.path[:2], "umask": os.umask(0o22), "stdout_tty": sys.stdout.isatty(),
            "stdout_write_through": sys.stdout.write_through, "encoding": sys.stdout.encoding,
        }
        print("probe " + json.dumps(probe, sort_keys=True).replace(cwd, "<cwd>"), flush=True)
        print("probe ppid %d warm %s" % (os.getppid(), WARM), flush=True)
        print("probe lazy imports paid %s" % DYNAMO, flush=True)
        exit_dir = os.environ.get("PROBE_EXIT_DIR")
        if exit_dir:  # what a process leaves to its exit: an unclosed file, an atexit handler
            tag = "warm" if WARM else "cold"
            _LEFT_OPEN.append(open(os.path.join(exit_dir, tag + "-unclosed.txt"), "w"))
            _LEFT_OPEN[-1].write("flushed at exit")
            atexit.register(lambda: open(os.path.join(exit_dir, tag + "-atexit.txt"), "w").write("ran"))
        logging.getLogger("probe").info("the probe logs through the harness's logging")
        print("to stderr", file=sys.stderr, flush=True)
        for op in self.core.searcher.operations():
            self.core.train.report_validation_metrics(op.length, {"loss": 0.5})
            op.report_completed(0.5)


class ProbeTrial(det.Trial):
    trial_controller_class = ProbeController

    def __init__(self, context):
        self.context = context
'''

HOLD_SCRIPT = '''
import subprocess
import time

child = subprocess.Popen(["sleep", "1000"])
print("child pid", child.pid, flush=True)
time.sleep(1000)
'''


class Setup:
    def __init__(self, tmp: pathlib.Path) -> None:
        model = tmp / "model"
        model.mkdir()
        (model / "model_def.py").write_text(PROBE_MODEL)
        (model / "hold.py").write_text(HOLD_SCRIPT)
        (model / "quick.py").write_text("print('quick script ran', flush=True)\n")
        self.model = model
        self.config: Dict[str, Any] = {
            "entrypoint": "model_def:ProbeTrial",
            "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True,
                         "max_length": {"batches": 1}},
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp), "storage_path": "ckpts"},
        }
        self.master = FakeMaster(config=self.config, hparams={}, model_dir=model).start()
        self.logs: List[Tuple[int, str, str]] = []
        self.exited = threading.Event()
        self.rm = LocalResourceManager(str(tmp / "work"), self._sink, slots=Slots(gpus=[], cpu_count=1), prestart=1,
                                       inherit_environment=True)
        self.rm.exit_listener = self.exited.set
        self.runs = 0

    def _sink(self, trial_id: int, when: datetime.datetime, stream: str, line: str) -> None:
        self.logs.append((trial_id, stream, line))

    def native(self, script: str) -> None:
        self.master.config = {**self.config, "internal": {"native": {"command": [script]}}}

    def launch(self, framework: Optional[str], **kwargs: Any) -> Any:
        self.runs += 1
        self.logs.clear()
        self.master.ops = [{"length": 1}]
        return self.rm.launch(trial_id=3, experiment_id=5, allocation_id="3.1", token=TOKEN, slots_needed=1,
                              master_url=self.master.url, framework=framework, **kwargs)

    def finish(self) -> int:
        assert self.exited.wait(120), "the run did not exit"
        self.exited.clear()
        exits = _wait_for(self.rm.poll_exited, 30, "the run to be reaped")
        assert len(exits) == 1
        return int(exits[0][2])

    def close(self) -> None:
        self.rm.kill_all()
        self.master.stop()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("forkserver")
    mp = pytest.MonkeyPatch()
    mp.setenv("DET_DATA_DIR", str(tmp / "data"))
    mp.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    (tmp / "exits").mkdir()
    mp.setenv("PROBE_EXIT_DIR", str(tmp / "exits"))
    s = Setup(tmp)
    try:
        yield s
    finally:
        s.close()
        mp.undo()


def _normalised(logs: List[Tuple[int, str, str]]) -> List[Tuple[str, str]]:
    """The run's output without timestamps and the per-process numbers (pids, rates)."""
    lines = []
    for _, stream, line in logs:
        if line.startswith("probe ppid") or line.startswith("probe lazy"):
            continue
        line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", line)
        line = re.sub(r"trial-3-[A-Za-z0-9_]+", "trial-3-<tmp>", line)
        lines.append((stream, line))
    return sorted(lines, key=lambda sl: sl[0])  # each stream in its order (two readers: their interleaving varies)


def _started_how(caplog: pytest.LogCaptureFixture) -> str:
    started = [r.getMessage() for r in caplog.records if "started run" in r.getMessage()]
    return started[-1]


def test_a_warm_trial_runs_exactly_like_a_cold_one(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.master")
    setup.master.config = dict(setup.config)
    setup.rm._server("torch")  # its imports overlap the cold run's
    setup.rm.warm = False  # this run starts cold (no fork server; the prestart pool's first take starts it cold too)
    try:
        cold = setup.launch(None)
    finally:
        setup.rm.warm = True
    assert setup.finish() == 0
    cold_logs = _normalised(setup.logs)
    assert "forked" not in _started_how(caplog) and "prestarted" not in _started_how(caplog)

    assert f"probe ppid {os.getpid()} warm False" in [line for _, _, line in setup.logs]
    assert "probe lazy imports paid False" in [line for _, _, line in setup.logs]
    warm = setup.launch("torch", preload=("numpy", "threadpoolctl"))
    assert setup.finish() == 0
    warm_logs = list(setup.logs)
    assert "forked from the torch server" in _started_how(caplog)
    server = setup.rm._servers["torch"]
    # it really was forked, and not re-executed: torch was there before the model's module imported it
    assert f"probe ppid {server.popen.pid} warm True" in [line for _, _, line in warm_logs]
    assert "probe lazy imports paid True" in [line for _, _, line in warm_logs]
    # both ended as a process ends (the warm one without the interpreter's teardown): files flushed, atexit run
    exits = pathlib.Path(os.environ["PROBE_EXIT_DIR"])
    for tag in ("cold", "warm"):
        assert (exits / f"{tag}-unclosed.txt").read_text() == "flushed at exit"
        assert (exits / f"{tag}-atexit.txt").read_text() == "ran"
    assert warm.popen.pid != server.popen.pid and cold.popen.pid != warm.popen.pid
    # Same environment, cwd, user and groups, seeds (Python, numpy, torch), threads, session, stdio and logs.
    probes = [json.loads(next(line for _, line in logs if line.startswith("probe {"))[len("probe "):])
              for logs in (cold_logs, _normalised(warm_logs))]
    differ = {k: (probes[0].get(k), probes[1].get(k)) for k in probes[0].keys() | probes[1].keys()
              if probes[0].get(k) != probes[1].get(k)}
    if "env" in differ:
        cold_env, warm_env = differ.pop("env")
        differ.update({f"env {k}": (cold_env.get(k), warm_env.get(k)) for k in cold_env.keys() | warm_env.keys()
                       if cold_env.get(k) != warm_env.get(k)})
    assert differ == {}, "cold vs warm"
    assert _normalised(warm_logs) == cold_logs
    probe = probes[1]
    assert probe["cuda"] is False and probe["own_session"] and probe["stdin"] == "/dev/null"
    assert probe["threads"] == (os.cpu_count() or 1) and probe["env"]["OMP_NUM_THREADS"] == str(os.cpu_count() or 1)
    assert probe["env"]["DET_TRIAL_ID"] == "3" and "DET_SESSION_TOKEN" in probe["env"]
    assert ("stderr", "to stderr") in cold_logs
    assert setup.master.completed[-2:] == [{"length": 1, "metric": 0.5}] * 2


def test_forked_children_get_fresh_unseeded_generators(setup: Setup) -> None:
    server = setup.rm._server("torch")
    assert server is not None and server.ready(120)
    # numpy's and Python's global generators are seeded from the OS in a fresh process: two forked children differ
    (setup.model / "seed.py").write_text("import numpy, random, torch\nprint('seed', numpy.random.random(), "
                                         "random.random(), torch.initial_seed(), flush=True)\n")
    setup.master.model_b64 = pack_dir(setup.model)
    setup.native("seed.py")
    values = []
    for _ in range(2):
        setup.launch("torch")
        assert setup.finish() == 0
        values.append([line for _, _, line in setup.logs if line.startswith("seed ")])
    assert len(values[0]) == len(values[1]) == 1
    assert all(a != b for a, b in zip(values[0][0].split()[1:], values[1][0].split()[1:])), values


def test_a_run_never_gets_a_worker_of_another_kind(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.master")
    setup.native("imports.py")
    (setup.model / "imports.py").write_text(
        "import os, sys\nprint('torch imported before', 'torch' in sys.modules, flush=True)\n"
        "print('OMP_NUM_THREADS', os.environ.get('OMP_NUM_THREADS'), flush=True)\n")
    setup.master.model_b64 = pack_dir(setup.model)

    def saw(line: str) -> bool:
        return ("stdout", line) in [(s, ln) for _, s, ln in setup.logs]

    # another framework (no server of its own): the harness-only server, never torch's
    setup.launch("tensorflow")
    assert setup.finish() == 0
    assert "forked from the harness server" in _started_how(caplog) and "tensorflow" not in setup.rm._servers
    assert saw("torch imported before False")
    # a script entrypoint (a command) never runs in a Trial-class worker, whatever framework it is given
    setup.launch("torch", script=True)
    assert setup.finish() == 0
    assert "forked from the harness server" in _started_how(caplog) and saw("torch imported before False")
    # a variable read when torch is imported that differs from the torch server's: a process that has not
    # imported torch yet reads it (the harness-only server's child)
    setup.launch("torch", env={"OMP_NUM_THREADS": "3"})
    assert setup.finish() == 0
    assert "forked from the harness server" in _started_how(caplog)
    assert saw("OMP_NUM_THREADS 3") and saw("torch imported before False")
    # a variable the interpreter reads at its start: no fork server can give it, a fresh process does
    setup.launch("torch", env={"PYTHONHASHSEED": "7"})
    assert setup.finish() == 0
    assert "forked" not in _started_how(caplog) and saw("torch imported before False")
    # the same run with the server's values is forked from torch's
    setup.launch("torch", env={"SOME_SETTING": "x"})
    assert setup.finish() == 0
    assert "forked from the torch server" in _started_how(caplog) and saw("torch imported before True")


def test_killing_a_warm_run_kills_its_process_group(setup: Setup) -> None:
    setup.native("hold.py")
    proc = setup.launch("torch")
    line = _wait_for(lambda: [ln for _, _, ln in setup.logs if ln.startswith("child pid ")], 60, "the trial's child")
    child = int(line[0].split()[-1])
    assert _alive(child) and os.getpgid(child) == proc.popen.pid
    setup.rm.kill("3.1")
    assert setup.finish() == -signal.SIGKILL
    _wait_for(lambda: not _alive(child), 10, "the trial's child to die with its group")


def test_framework_of_a_trial_class_is_read_from_its_source(tmp_path: pathlib.Path) -> None:
    (tmp_path / "torch_trial.py").write_text("from determined import pytorch\nfrom helpers import x\n")
    (tmp_path / "helpers.py").write_text("import numpy\nx = 1\n")
    (tmp_path / "keras_trial.py").write_text("import determined.keras\nimport tensorflow as tf\n")
    (tmp_path / "indirect.py").write_text("from nets import Net\n")
    (tmp_path / "nets.py").write_text("import torch.nn as nn\nNet = nn.Linear\n")
    (tmp_path / "both.py").write_text("import torch\nimport tensorflow\n")
    (tmp_path / "broken.py").write_text("import torch\ndef (\n")
    assert framework_of_directory(tmp_path, "torch_trial:T") == "torch"
    # what the fork server may import for it: the modules from outside the model directory, but the framework's
    assert scan_directory(tmp_path, "torch_trial:T") == TrialImports("torch", ("numpy",))
    assert framework_of_directory(tmp_path, "indirect:T") == "torch"
    assert framework_of_directory(tmp_path, "keras_trial:T") == "tensorflow"
    assert framework_of_directory(tmp_path, "both:T") is None
    assert framework_of_directory(tmp_path, "broken:T") is None
    assert framework_of_directory(tmp_path, "missing:T") is None
    assert framework_of_directory(tmp_path, "python3 torch_trial.py") is None  # a command, not a Trial class
    assert framework_of_directory(tmp_path, None) is None
    import base64

    assert framework_of_archive(base64.b64decode(pack_dir(tmp_path)), "indirect:T") == "torch"
    assert framework_of_archive(b"not an archive", "indirect:T") is None


def test_in_a_warm_process_framework_settings_of_the_config_restart_it_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _environment._read_at_start("OMP_NUM_THREADS")
    monkeypatch.setattr(_environment, "PRELOADED_FRAMEWORK", "torch")
    assert _environment._read_at_start("OMP_NUM_THREADS") and _environment._read_at_start("PYTHONHASHSEED")
    assert not _environment._read_at_start("CUDA_VISIBLE_DEVICES") and not _environment._read_at_start("MY_FLAG")
    assert forkserver.import_time_variables({"OMP_NUM_THREADS": "1", "A": "b", "CUDA_VISIBLE_DEVICES": "0"}) == {
        "OMP_NUM_THREADS": "1"}


NATIVE_PROBE = '''
import json, os, random, sys
probe = {"env": dict(os.environ), "cwd": os.getcwd(), "uid": os.getuid(), "gid": os.getgid(),
         "groups": sorted(os.getgroups()), "own_session": os.getsid(0) == os.getpid(),
         "stdin": os.path.realpath("/proc/self/fd/0"), "sys_path": sys.path[:2], "umask": os.umask(0o22),
         "stdout_write_through": sys.stdout.write_through, "encoding": sys.stdout.encoding, "argv": sys.argv,
         "frameworks": sorted(m for m in ("torch", "tensorflow", "numpy") if m in sys.modules)}
print("probe " + json.dumps(probe, sort_keys=True).replace(probe["cwd"], "<cwd>"), flush=True)
print("probe random %r ppid %d" % (random.random(), os.getppid()), flush=True)
'''


def test_a_native_script_runs_in_the_harness_server_exactly_like_a_cold_one(
        setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="determined.master")
    (setup.model / "native_probe.py").write_text(NATIVE_PROBE)
    setup.master.model_b64 = pack_dir(setup.model)
    setup.native("native_probe.py")

    def probe() -> Tuple[Dict[str, Any], List[str]]:
        lines = [ln for _, _, ln in setup.logs]
        found = json.loads(next(ln for ln in lines if ln.startswith("probe {"))[len("probe "):])
        return found, next(ln for ln in lines if ln.startswith("probe random")).split()

    setup.rm.warm = False
    try:
        setup.launch(None)
    finally:
        setup.rm.warm = True
    assert setup.finish() == 0
    assert "forked" not in _started_how(caplog)
    cold, _ = probe()
    runs = []
    for _ in range(2):
        setup.launch(None)
        assert setup.finish() == 0
        assert "forked from the harness server" in _started_how(caplog)
        runs.append(probe())
    server = setup.rm._servers["harness"]
    (warm, first), (_, second) = runs
    assert warm == cold and warm["frameworks"] == [] and warm["own_session"] and warm["stdin"] == "/dev/null"
    # forked from the server (in advance, for the next request), with fresh random state in each child
    assert first[-1] == second[-1] == str(server.popen.pid)
    assert first[2] != second[2]


CONTEXT_PROBE = '''
import os
from determined import core
print("handover visible", "DET_RUN_CONTEXT_FILE" in os.environ, flush=True)
with core.init() as ctx:
    for op in ctx.searcher.operations():
        print("operation", op.length, "hparams", ctx.info.hparams, flush=True)
        ctx.train.report_validation_metrics(op.length, {"loss": 0.5})
        op.report_completed(0.5)
'''


@pytest.mark.parametrize("whose", ["own", "another trial's"])
def test_a_run_handed_its_context_does_not_ask_for_it(setup: Setup, whose: str) -> None:
    (setup.model / "context_probe.py").write_text(CONTEXT_PROBE)
    setup.master.model_b64 = pack_dir(setup.model)
    setup.native("context_probe.py")
    context = {"trial_id": 3 if whose == "own" else 4, "experiment_id": 5, "config": setup.master.config,
               "hparams": {"handed": "over"}, "trial_seed": 1234, "latest_checkpoint": None, "steps_completed": 0,
               "model_def": {"b64_tgz": setup.master.model_b64}, "searcher_operation": {"length": 4},
               "preempt": False}
    asked = setup.master.context_requests
    proc = setup.launch(None, context=context)
    handed = pathlib.Path(proc.work_dir) / ".det-run-context.json"
    assert handed.stat().st_mode & 0o777 == 0o600  # it holds the config's secrets: the run's user reads it only
    assert setup.finish() == 0
    lines = [ln for _, _, ln in setup.logs]
    assert "handover visible False" in lines  # the trial's code never sees the platform's variable
    if whose == "own":
        assert setup.master.context_requests == asked
        assert "operation 4 hparams {'handed': 'over'}" in lines  # the handed operation, not the master's length 1
    else:  # not this trial's: asked for as before
        assert setup.master.context_requests == asked + 1 and "operation 1 hparams {}" in lines
    assert not handed.exists()  # the run's directory goes with the run
