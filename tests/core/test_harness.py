import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

from tests.core._fake_master import TOKEN, FakeMaster

MODEL_DEF = '''
import json
import time

import determined as det


class CountingController(det.TrialController):
    """Counts 'batches': enough of a controller to exercise the whole pull loop."""

    def run(self):
        core = self.core
        trial = self.trial_class(self.context)
        steps = 0
        if core.info.latest_checkpoint:
            with core.checkpoint.restore_path(core.info.latest_checkpoint) as path:
                steps = json.loads((path / "state.json").read_text())["steps"]
            print(f"restored at {steps} batches", flush=True)
        unit = self.context.get_experiment_config()["scheduling_unit"]
        for op in core.searcher.operations():
            while steps < op.length:
                steps += 1
                trial.train_one(steps)
                if steps % unit == 0 or steps == op.length:
                    core.train.report_training_metrics(steps, {"loss": trial.loss(steps)})
                if core.preempt.should_preempt():
                    self.save(steps)
                    return
            core.train.report_validation_metrics(steps, {"loss": trial.loss(steps)})
            self.save(steps)
            op.report_completed(trial.loss(steps))

    def save(self, steps):
        meta = {"steps_completed": steps, "framework": "counting", "format": "json"}
        with self.core.checkpoint.store_path(meta) as (path, uuid):
            (path / "state.json").write_text(json.dumps({"steps": steps}))


class CountingTrial(det.Trial):
    trial_controller_class = CountingController

    def __init__(self, context):
        self.context = context
        self.delay = context.get_hparam("delay")

    def train_one(self, step):
        if step == self.context.get_hparams().get("fail_at"):
            raise ValueError(f"user code failed at batch {step}")
        time.sleep(self.delay)

    def loss(self, steps):
        return 1.0 / steps
'''

NATIVE_SCRIPT = '''
import sys
from determined import _execution
from model_def import CountingTrial

print("native script argv:", sys.argv[1:], flush=True)
_execution.run_native_trial(CountingTrial)
raise AssertionError("run_native_trial must exit the process")
'''


def _config(tmp_path: pathlib.Path, **extra: Any) -> Dict[str, Any]:
    config = {
        "entrypoint": "model_def:CountingTrial",
        "scheduling_unit": 5,
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True, "max_length": {"batches": 100}},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"},
    }
    config.update(extra)
    return config


@pytest.fixture
def model_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "model"
    root.mkdir()
    (root / "model_def.py").write_text(MODEL_DEF)
    (root / "train.py").write_text(NATIVE_SCRIPT)
    return root


@pytest.fixture
def make_master(model_dir: pathlib.Path, tmp_path: pathlib.Path) -> Iterator[Any]:
    masters = []

    def make(config: Dict[str, Any], hparams: Dict[str, Any]) -> FakeMaster:
        master = FakeMaster(config=config, hparams=hparams, model_dir=model_dir).start()
        masters.append(master)
        return master

    yield make
    for m in masters:
        m.stop()


def _run_harness(master: FakeMaster, tmp_path: pathlib.Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update({
        "DET_MASTER": master.url, "DET_TRIAL_ID": "3", "DET_EXPERIMENT_ID": "5",
        "DET_ALLOCATION_ID": "3.1", "DET_SESSION_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1",
    })
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "determined.exec.harness"],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )


def test_pull_loop_metrics_checkpoints_and_completion(make_master: Any, tmp_path: pathlib.Path) -> None:
    master = make_master(_config(tmp_path), {"delay": 0.0, "global_batch_size": 4})
    master.ops = [{"wait": True}, {"length": 7}, {"wait": True}, {"length": 12}]
    proc = _run_harness(master, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert master.bad_auth == 0
    assert master.context_requests == 1, "core.init() in the trial reuses the context the harness fetched"
    assert [t["steps_completed"] for t in master.training] == [5, 7, 10, 12]
    assert [v["steps_completed"] for v in master.validation] == [7, 12]
    assert master.completed == [{"length": 7, "metric": 1 / 7}, {"length": 12, "metric": 1 / 12}]
    assert [c["steps_completed"] for c in master.checkpoints] == [7, 12]
    store = tmp_path / "ckpts"
    for ckpt in master.checkpoints:
        assert ckpt["framework"] == "counting" and ckpt["format"] == "json"
        assert ckpt["resources"].pop("metadata.json") > 0  # the metadata, as Determined 0.38 writes it
        assert ckpt["resources"] == {"state.json": len('{"steps": %d}' % ckpt["steps_completed"])}
        assert (store / ckpt["uuid"] / "state.json").is_file()
    # Log lines go to stdout with timestamps; the work dir is removed afterwards.
    assert "trial 3 of experiment 5 starting" in proc.stdout
    assert proc.stdout.split(" ")[0].count("-") == 2
    assert not any((tmp_path / "det-data" / "work").iterdir())


def test_preemption_checkpoints_and_exits_zero_then_resumes(make_master: Any, tmp_path: pathlib.Path) -> None:
    master = make_master(_config(tmp_path), {"delay": 0.002, "global_batch_size": 4})
    master.ops = [{"length": 100_000}]
    master.preempt_on_training_metrics = True
    proc = _run_harness(master, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert master.completed == [] and master.validation == []
    assert len(master.checkpoints) == 1
    stopped_at = master.checkpoints[0]["steps_completed"]
    assert 5 <= stopped_at < 100_000
    assert master.preemption_polls < stopped_at  # polls are rate-limited, not one per batch

    # The next run resumes from that checkpoint at the exact batch.
    resumed = make_master(_config(tmp_path), {"delay": 0.0, "global_batch_size": 4})
    resumed.latest_checkpoint = {"uuid": master.checkpoints[0]["uuid"], "steps_completed": stopped_at}
    resumed.ops = [{"length": stopped_at + 6}]
    proc = _run_harness(resumed, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"restored at {stopped_at} batches" in proc.stdout
    assert resumed.training[-1]["steps_completed"] == stopped_at + 6
    assert all(t["steps_completed"] > stopped_at for t in resumed.training)
    assert resumed.completed == [{"length": stopped_at + 6, "metric": 1 / (stopped_at + 6)}]


def test_user_code_failure_exits_nonzero_with_traceback(make_master: Any, tmp_path: pathlib.Path) -> None:
    master = make_master(_config(tmp_path), {"delay": 0.0, "fail_at": 3, "global_batch_size": 4})
    master.ops = [{"length": 10}]
    proc = _run_harness(master, tmp_path)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "ValueError: user code failed at batch 3" in proc.stderr
    assert "model_def.py" in proc.stderr
    assert master.checkpoints == [] and master.completed == []


def test_bad_entrypoint_exits_nonzero(make_master: Any, tmp_path: pathlib.Path) -> None:
    master = make_master(_config(tmp_path, entrypoint="model_def:Missing"), {"delay": 0.0})
    proc = _run_harness(master, tmp_path)
    assert proc.returncode == 1
    assert "has no 'Missing'; Trial classes defined there: CountingTrial" in proc.stderr


def test_native_command_runs_the_script(make_master: Any, tmp_path: pathlib.Path) -> None:
    config = _config(tmp_path, internal={"native": {"command": ["train.py", "--flag", "v"]}})
    del config["entrypoint"]
    master = make_master(config, {"delay": 0.0})
    master.ops = [{"length": 3}]
    proc = _run_harness(master, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "native script argv: ['--flag', 'v']" in proc.stdout
    assert master.completed == [{"length": 3, "metric": 1 / 3}]
    assert [c["steps_completed"] for c in master.checkpoints] == [3]


def test_missing_environment_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    proc = subprocess.run(
        [sys.executable, "-m", "determined.exec.harness"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1
    assert "DET_MASTER is not set" in proc.stderr


def test_unreachable_master_exits_nonzero(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import socket

    from determined.exec import harness

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("DET_MASTER", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("DET_TRIAL_ID", "3")
    monkeypatch.setattr(harness, "MASTER_RETRIES", 1)
    monkeypatch.setattr(harness, "_setup_logging", lambda: None)
    assert harness.main() == harness.EXIT_MASTER_UNREACHABLE
    assert "cannot reach the master" in capsys.readouterr().err


BAD_INIT = '''
import determined.pytorch as det_torch


class BadInitTrial(det_torch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.order = sorted([1, "a"])  # TypeError: '<' not supported between 'str' and 'int'

    def train_batch(self, batch, epoch_idx, batch_idx):
        raise AssertionError("never reached")

    def evaluate_batch(self, batch):
        raise AssertionError("never reached")

    def build_training_data_loader(self):
        raise AssertionError("never reached")

    def build_validation_data_loader(self):
        raise AssertionError("never reached")
'''


def test_a_type_error_in_a_trials_init_ends_the_trial_without_restarts(
    make_master: Any, model_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    (model_dir / "bad_init.py").write_text(BAD_INIT)
    master = make_master(_config(tmp_path, entrypoint="bad_init:BadInitTrial"), {"global_batch_size": 4})
    master.ops = [{"length": 3}]
    proc = _run_harness(master, tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "BadInitTrial(context) raised TypeError" in proc.stderr and "bad_init.py" in proc.stderr
    assert master.early_exits == [{"reason": "ERRORED"}]  # a Trial-API error: the master does not restart it
