"""Determined 0.38's Keras callbacks (det.keras.DeterminedCallback, det.keras.TensorBoard) in a `model.fit()`
script run as an experiment's entrypoint on an embedded master: it reports, checkpoints, pauses and resumes at the
right epoch; on two CPU slots through determined.launch.tensorflow (MultiWorkerMirroredStrategy) only the chief
reports and keeps files. Off the platform: a checkpoint of another run warm-starts (weights, not the epoch)."""
import json
import pathlib
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterator, Tuple

import pytest

from determined import master
from determined.common.api import Session
from determined.master.rm import Slots
from tests.master._helpers import model_def, wait_for

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).parent
WAIT = (pathlib.Path(__file__).parents[1] / "_wait_for_pause.py").read_text()
SCRIPT = (HERE / "_callback_script.py").read_text()


def submit(s: Session, tmp: pathlib.Path, name: str, **extra: Any) -> int:
    config = {"name": name, "searcher": {"name": "single", "metric": "categorical_accuracy",
                                         "smaller_is_better": False},
              "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp), "storage_path": name,
                                     "save_trial_latest": 5},
              "entrypoint": "python3 train.py", "max_restarts": 0, **extra}
    body = {"config": config, "model_definition": model_def({"train.py": SCRIPT, "wait_for_pause.py": WAIT})}
    return int(s.post("/experiments", body)["experiment"]["id"])


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, Dict[str, int], pathlib.Path]]:
    tmp = tmp_path_factory.mktemp("keras038")
    with master.start(tmp / "data", slots=Slots(gpus=[], cpu_count=3), preemption_timeout=30) as em:
        s = em.session()
        experiments = {
            "pause": submit(s, tmp, "pause", hyperparameters={"epochs": 3, "batch_size": 32, "wait_dir": str(tmp)}),
            "two": submit(s, tmp, "two", hyperparameters={"epochs": 2, "batch_size": 32},
                          entrypoint="python3 -m determined.launch.tensorflow -- python3 train.py",
                          resources={"slots_per_trial": 2}),
        }
        yield s, experiments, tmp


def state(s: Session, exp_id: int) -> str:
    return str(s.get(f"/experiments/{exp_id}")["experiment"]["state"])


def logs(s: Session, trial_id: int) -> str:
    return "\n".join(line["message"] for line in s.get(f"/trials/{trial_id}/logs", params={"limit": 10000})["logs"])


def test_a_checkpoint_of_another_run_warm_starts_and_its_own_run_continues(
        platform: Tuple[Session, Dict[str, int], pathlib.Path], tmp_path: pathlib.Path) -> None:
    """continue_id decides: the same id goes on at the epoch after the checkpoint's, another one only loads the
    weights and trains from initial_epoch (off the platform, in a process of its own, while the platform's
    experiments of the next tests train)."""
    proc = subprocess.run([sys.executable, str(HERE / "_warm_start.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-3000:]


def test_a_fit_script_reports_checkpoints_and_resumes_at_its_epoch_after_a_pause(
        platform: Tuple[Session, Dict[str, int], pathlib.Path]) -> None:
    s, experiments, tmp = platform
    exp_id = experiments["pause"]
    wait_for(lambda: (tmp / "ready").exists(), 120, "the script to finish its first epoch")
    s.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: state(s, exp_id) == "PAUSED", 60, "the experiment to pause")
    s.post(f"/experiments/{exp_id}/activate")
    wait_for(lambda: state(s, exp_id) in ("COMPLETED", "ERROR", "CANCELED"), 120, "the experiment to end")
    desc = s.get(f"/experiments/{exp_id}")
    [trial] = desc["trials"]
    text = logs(s, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED" and trial["state"] == "COMPLETED", text[-3000:]
    t = s.get(f"/trials/{trial['id']}")
    training = [(m["steps_completed"], m["metrics"]["epochs"], m["metrics"]["batches"]) for m in t["training_metrics"]]
    assert training == [(4, 1, 4), (8, 2, 8), (12, 3, 12)], text[-6000:]  # 4 batches an epoch; epoch 3 ran after the pause
    assert all("val_loss" not in m["metrics"] for m in t["training_metrics"])
    validation = t["validation_metrics"]
    assert [(m["steps_completed"], m["metrics"]["epochs"]) for m in validation] == [(4, 1), (8, 2), (12, 3)]
    assert validation[-1]["metrics"]["loss"] < validation[0]["metrics"]["loss"]  # it learns
    assert "categorical_accuracy" in validation[-1]["metrics"]
    checkpoints = [c for c in t["checkpoints"] if c["state"] == "COMPLETED"]
    assert [c["steps_completed"] for c in checkpoints] == [4, 8, 12]
    # the second run trained the third epoch only: its progress lines (verbose=1) start at batch 8
    assert "run 2 starts from checkpoint" in text, text[-3000:]
    second = text.split("run 2 starts from checkpoint", 1)[1]
    assert "at epoch 3 (8 batches trained)" in second  # the callback's own line: same continue_id, next epoch
    assert "training after 12 batches: 100% (4/4)" in second and "training after 4 batches" not in second, second
    assert desc["experiment"]["progress"] == 1.0
    # det.keras.TensorBoard wrote Keras's own event files into the trial's TensorBoard directory
    assert list((tmp / "data").rglob("train/events.out.tfevents.*")), "no Keras TensorBoard files"


def test_two_cpu_slots_train_with_multi_worker_mirrored_strategy_and_only_the_chief_reports(
        platform: Tuple[Session, Dict[str, int], pathlib.Path]) -> None:
    s, experiments, tmp = platform
    exp_id = experiments["two"]
    wait_for(lambda: state(s, exp_id) in ("COMPLETED", "ERROR", "CANCELED"), 180, "the experiment to end")
    [trial] = s.get(f"/experiments/{exp_id}")["trials"]
    text = logs(s, trial["id"])
    assert trial["state"] == "COMPLETED", text[-3000:]
    assert "[rank=0] rank 0 of 2: MultiWorkerMirroredStrategy" in text, text[-5000:]
    assert "[rank=1] rank 1 of 2: MultiWorkerMirroredStrategy" in text
    t = s.get(f"/trials/{trial['id']}")
    assert [m["steps_completed"] for m in t["training_metrics"]] == [4, 8]
    checkpoints = [c for c in t["checkpoints"] if c["state"] == "COMPLETED"]
    assert [c["steps_completed"] for c in checkpoints] == [4, 8]
    files = sorted(k for k in checkpoints[-1]["resources"] if not k.endswith("/"))
    assert files[:3] == ["callback_state", "checkpoint", "metadata.json"] and all(
        f.startswith("model_checkpoint") for f in files[3:])  # the chief's weights only
    stored = tmp / "two" / checkpoints[-1]["uuid"]
    assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 8}
    shutil.rmtree(stored.parent, ignore_errors=True)
