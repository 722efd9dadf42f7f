"""The 0.38 SDK drives a running trial: `Experiment.pause` checkpoints and stops it, `Experiment.activate` resumes it
from that checkpoint, `Trial.kill` ends it at once while the experiment goes on to its end, `Experiment.kill` ends
a whole experiment. Embedded (this process becomes the master) and against a running server; the PostgreSQL stage
runs this module too.
"""
import pathlib
import tempfile
import time
from typing import Callable, Iterator, Optional

import pytest

from determined.experimental import client
from determined.master import embedded
from tests import _patience, _postgres

pytestmark = pytest.mark.slow

# Trains until the platform asks it to stop: checkpoints on a preemption (pause), resumes from the checkpoint.
SCRIPT = '''
import time

import determined as det

with det.core.init() as core:
    info = det.get_cluster_info()
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "steps").read_text())
        print(f"resumed at batch {step}", flush=True)
    while True:
        step += 1
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        if core.preempt.should_preempt():
            with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (path / "steps").write_text(str(step))
            print(f"stopped at batch {step}", flush=True)
            break
        time.sleep(0.05)
'''

CONFIG = '''
name: live-control
entrypoint: python3 train.py
searcher:
  name: grid
  metric: loss
  smaller_is_better: true
  max_length:
    batches: 1000000
hyperparameters:
  k:
    type: categorical
    vals: [1, 2]
resources:
  slots_per_trial: 1
max_restarts: 0
'''


def _until(what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
    _patience.wait_for(check, timeout, f"until {what}", interval=0.1)  # timeout x the load factor


def _steps(trial: client.Trial) -> list:
    return [m.steps_completed for m in trial.iter_metrics("training")]


@pytest.fixture(params=["embedded", "server"])
def session(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[client.Determined]:
    root = pathlib.Path(tempfile.mkdtemp(prefix="det-live-"))
    data_dir = root / "det-data"
    monkeypatch.setenv("DET_DATA_DIR", str(data_dir))
    db_url = _postgres.database_url_for_subprocesses(data_dir)
    if db_url:
        monkeypatch.setenv("DET_DB_URL", db_url)
    monkeypatch.setenv("DET_CPU_SLOTS", "2")
    monkeypatch.delenv("DET_MASTER", raising=False)
    master: Optional[embedded.EmbeddedMaster] = None
    if request.param == "server":
        master = embedded.start(data_dir)
        monkeypatch.setenv("DET_MASTER", master.url)
    d = client.Determined()
    try:
        yield d
    finally:
        d.close()
        if master is not None:
            master.stop()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def test_pause_activate_and_kill_a_running_experiment_and_trial(session: client.Determined,
                                                                tmp_path: pathlib.Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text(SCRIPT)
    config = tmp_path / "live.yaml"
    config.write_text(CONFIG)

    exp = session.create_experiment(str(config), str(model_dir))
    _until("both trials train", lambda: len(exp.list_trials()) == 2
           and all(_steps(t) for t in exp.list_trials()))

    exp.pause()
    assert exp.state == client.ExperimentState.PAUSED
    _until("the paused trials checkpointed and exited",
           lambda: all(t.list_checkpoints() and any("stopped at batch" in line for line in t.iter_logs())
                       for t in exp.list_trials()))
    paused_at = {t.id: t.list_checkpoints()[0].metadata["steps_completed"] for t in exp.list_trials()}
    time.sleep(1.0)
    assert {t.id: max(_steps(t)) for t in exp.list_trials()} == paused_at, "nothing trains while paused"
    exp.reload()
    assert exp.state == client.ExperimentState.PAUSED

    exp.activate()
    assert exp.state == client.ExperimentState.ACTIVE
    _until("the trials resume from their checkpoints",
           lambda: all(max(_steps(t)) > paused_at[t.id] + 2
                       and f"resumed at batch {paused_at[t.id]}" in "".join(t.iter_logs()) for t in exp.list_trials()))
    first, second = sorted(exp.list_trials(), key=lambda t: t.id)
    for trial in (first, second):
        steps = _steps(trial)
        assert steps == sorted(set(steps)), "resumed from the checkpoint: no batch reported twice"

    first.kill()
    _until("the killed trial ended", lambda: session.get_trial(first.id).state == client.TrialState.CANCELED)
    exp.reload()
    assert exp.state == client.ExperimentState.ACTIVE, "the experiment goes on with its other trial"
    killed_at = max(_steps(first))
    assert max(_steps(session.get_trial(second.id))) >= 1

    exp.kill()
    assert exp.wait(interval=0.1) == client.ExperimentState.CANCELED
    assert session.get_trial(second.id).state == client.TrialState.CANCELED
    assert max(_steps(session.get_trial(first.id))) == killed_at, "a killed trial never runs again"
    assert {t.state for t in exp.list_trials()} == {client.TrialState.CANCELED}
