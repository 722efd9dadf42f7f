"""The Native API of seed 002: create() from a plain script, and create_trial_instance()."""
import pathlib
import subprocess
import sys

import pytest

from tests.e2e._helpers import copy_example, det_json

pytestmark = pytest.mark.slow

def _run(model: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train_native.py", *args], cwd=model, capture_output=True, text=True,
                          timeout=300)


def test_native_script_local_test_and_full_experiment(tmp_path: pathlib.Path) -> None:
    """examples/digits_pytorch/train_native.py, exactly as the README runs it."""
    model = copy_example(tmp_path)

    test = _run(model, "--test")
    assert test.returncode == 0, test.stdout + test.stderr
    assert det_json("experiment", "list") == [], "local test mode stores nothing"

    full = _run(model)
    assert full.returncode == 0, full.stdout + full.stderr
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["num_trials"] == 4
    assert exp["description"] == "digits MLP (Native API)"
    assert exp["best_validation"] > 0.9
    desc = det_json("experiment", "describe", str(exp["id"]))
    assert all(t["total_batches"] == 2000 for t in desc["trials"])
    assert all(16 <= t["hparams"]["hidden_size"] <= 256 for t in desc["trials"])
    assert len({t["hparams"]["learning_rate"] for t in desc["trials"]}) == 4


def test_create_trial_instance(tmp_path: pathlib.Path) -> None:
    model = copy_example(tmp_path)
    code = (
        "from determined.experimental import create_trial_instance\n"
        "from model_def import DigitsTrial\n"
        "t = create_trial_instance(DigitsTrial, 'ckpts', hparams={'global_batch_size': 16, "
        "'learning_rate': 0.01, 'hidden_size': 8, 'dropout': 0.0})\n"
        "assert isinstance(t, DigitsTrial)\n"
        "assert t.context.get_per_slot_batch_size() == 16\n"
        "batch = next(iter(t.build_training_data_loader()))\n"
        "print('OK', len(batch[0]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=model, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 16" in proc.stdout
