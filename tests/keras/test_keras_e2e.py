"""The iris example end to end: the Native API script (local test mode, then a full experiment), the
TFKerasTrial through `det experiment create`, and Checkpoint.load() of what they trained."""
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from determined.experimental import Determined
from tests.e2e._helpers import det, det_json

pytestmark = pytest.mark.slow

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "iris_tf_keras"


def _copy_example(tmp_path: pathlib.Path) -> pathlib.Path:
    dst = tmp_path / "iris"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _check_loaded_model(experiment_id: int, model_dir: pathlib.Path) -> None:
    """The top checkpoint loads as a Keras model that scores exactly what the trial reported."""
    checkpoint = Determined().get_experiment(experiment_id).top_checkpoint()
    assert checkpoint.framework.startswith("tensorflow-2.") and checkpoint.format == "saved_weights"
    model = checkpoint.load(str(model_dir.parent / f"ckpt-{experiment_id}"))
    assert isinstance(model, tf.keras.Model)
    sys.path.insert(0, str(model_dir))
    sys.modules.pop("data", None)  # another test's example may have imported its own data.py
    try:
        from data import load_split
    finally:
        sys.path.remove(str(model_dir))
        sys.modules.pop("data", None)
    x, y = load_split("validation")
    accuracy = float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == np.argmax(y, axis=1)))
    assert accuracy == pytest.approx(checkpoint.validation_metrics["val_categorical_accuracy"], abs=1e-6)
    assert accuracy > 0.8


def test_native_script_local_test_then_full_experiment(tmp_path: pathlib.Path) -> None:
    model_dir = _copy_example(tmp_path)
    script = model_dir / "train_native.py"
    script.write_text(script.read_text().replace('"max_trials": 2', '"max_trials": 1'))

    test = subprocess.run([sys.executable, "train_native.py", "--test"], cwd=model_dir, capture_output=True,
                          text=True, timeout=300)
    assert test.returncode == 0, test.stdout + test.stderr[-3000:]
    assert "test mode passed:" in test.stdout and "'val_categorical_accuracy'" in test.stdout
    assert det_json("experiment", "list") == [], "local test mode stores nothing"

    full = subprocess.run([sys.executable, "train_native.py"], cwd=model_dir, capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 0, full.stdout + full.stderr[-3000:]
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["description"] == "iris tf.keras (Native API)"
    [trial] = det_json("experiment", "describe", str(exp["id"]))["trials"]
    assert trial["total_batches"] == 200 and 8 <= trial["hparams"]["hidden_units"] <= 48
    _check_loaded_model(exp["id"], model_dir)


def test_trial_api_const_experiment(tmp_path: pathlib.Path) -> None:
    model_dir = _copy_example(tmp_path)
    proc = det("experiment", "create", str(model_dir / "const.yaml"), str(model_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["best_validation"] > 0.8
    _check_loaded_model(exp["id"], model_dir)
