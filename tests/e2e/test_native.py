"""The Native API of seed 002: create() from a plain script, and create_trial_instance()."""
import pathlib
import subprocess
import sys

import pytest

from tests.e2e._helpers import copy_example, det_json

pytestmark = pytest.mark.slow

SCRIPT = '''
import sys
import determined as det
from determined.experimental import create
from model_def import DigitsTrial

config = {
    "description": "native digits",
    "hyperparameters": {
        "global_batch_size": det.Constant(32),
        "learning_rate": det.Log(-3, -2, base=10),
        "hidden_size": det.Integer(16, 32),
        "dropout": det.Categorical([0.0, 0.1]),
    },
    "searcher": {"name": "random", "max_trials": 2, "metric": "validation_accuracy",
                 "smaller_is_better": False, "max_length": {"batches": 40}},
    "min_validation_period": {"batches": 20},
}
mode = sys.argv[1]
result = create(DigitsTrial, config, local=True, test=(mode == "test"), context_dir=".")
print("RESULT", result)
'''


def _run(model: pathlib.Path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", mode], cwd=model, capture_output=True, text=True, timeout=300)


def test_native_create_local_test_and_full(tmp_path: pathlib.Path) -> None:
    model = copy_example(tmp_path)
    (model / "train.py").write_text(SCRIPT)

    test = _run(model, "test")
    assert test.returncode == 0, test.stdout + test.stderr
    assert det_json("experiment", "list") == [], "local test mode stores nothing"

    full = _run(model, "full")
    assert full.returncode == 0, full.stdout + full.stderr
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "COMPLETED" and exp["num_trials"] == 2
    assert exp["description"] == "native digits"
    desc = det_json("experiment", "describe", str(exp["id"]))
    assert all(t["total_batches"] == 40 for t in desc["trials"])
    assert all(0.0 <= t["hparams"]["dropout"] <= 0.1 for t in desc["trials"])


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
