"""examples/estimator_iris end to end: the Native API script (local test mode, and an experiment on the
embedded master), `det experiment create const.yaml`, and Checkpoint.load() of the SavedModel."""
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from tests.e2e._helpers import det, det_json

pytestmark = pytest.mark.slow

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "estimator_iris"


@pytest.fixture
def model(tmp_path: pathlib.Path) -> pathlib.Path:
    dst = tmp_path / "model"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _native(model: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train_native.py", *args], cwd=model, capture_output=True, text=True,
                          timeout=300)


def _load_and_score(checkpoint_uuid: str, model: pathlib.Path, tmp_path: pathlib.Path) -> float:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(model)!r})\n"
        "from determined.experimental import Determined\n"
        "from model_def import predict\n"
        "from data import iris_split\n"
        f"ckpt = Determined().get_checkpoint({checkpoint_uuid!r})\n"
        f"saved_model = ckpt.load(path={str(tmp_path / 'ckpt')!r}, tags=['serve'])\n"
        "x, y = iris_split(train=False)\n"
        "print('ACCURACY', (predict(saved_model, x) == y).mean())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return float(proc.stdout.split("ACCURACY")[-1])


def test_native_script_local_test_mode(model: pathlib.Path) -> None:
    proc = _native(model, "--test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test mode passed: accuracy" in proc.stdout
    assert det_json("experiment", "list") == [], "local test mode stores nothing"


def test_native_script_runs_an_experiment(model: pathlib.Path) -> None:
    proc = _native(model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["num_trials"] == 2
    assert exp["description"] == "iris DNNClassifier (Native API)"
    desc = det_json("experiment", "describe", str(exp["id"]))
    for trial in desc["trials"]:
        assert trial["total_batches"] == 100 and trial["latest_checkpoint_uuid"]
        assert 8 <= trial["hparams"]["hidden_units"] <= 16
        assert trial["best_validation"] > 0.5


def test_trial_api_experiment(model: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cfg = yaml.safe_load((model / "const.yaml").read_text())
    cfg["searcher"]["max_length"] = {"batches": 60}
    cfg["min_validation_period"] = {"batches": 30}
    cfg["checkpoint_policy"] = "all"
    (tmp_path / "short.yaml").write_text(yaml.safe_dump(cfg))
    det("experiment", "create", str(tmp_path / "short.yaml"), str(model), check=True)
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED"
    desc = det_json("experiment", "describe", str(exp["id"]))
    [trial] = desc["trials"]
    assert trial["total_batches"] == 60
    trial_desc = det_json("trial", "describe", str(trial["id"]), "--metrics")
    steps = [c["steps_completed"] for c in trial_desc["checkpoints"]]
    assert steps == [30, 60]
    for c in trial_desc["checkpoints"]:
        assert c["format"] == "saved_model" and c["framework"].startswith("tensorflow-")
        assert "serving/saved_model.pb" in c["resources"] and "hparams.txt" in c["resources"]
    losses = [m["metrics"]["loss"] for m in trial_desc["training_metrics"]]
    assert losses[-1] < losses[0]
    accuracy = _load_and_score(trial["latest_checkpoint_uuid"], model, tmp_path)
    assert accuracy == pytest.approx(trial["latest_validation"]["accuracy"], abs=1e-6)
    assert np.isfinite(accuracy)
