"""One small experiment of the digits example, trained for real once per test session and shared read-only.

Its trial class (`ckpt_probe:ProbedDigitsTrial`) writes, every time it checkpoints, the predictions of its
model on fixed inputs to `<probe_dir>/<trial_id>-<batches>.json`: what a loaded checkpoint must reproduce.
"""
import atexit
import dataclasses
import json
import pathlib
import shutil
import tempfile
from typing import Any, Dict, List, Optional

import torch

from tests.e2e._helpers import copy_example, det, small_config

PROBE_MODULE = '''
import json
import pathlib

import torch

import determined.pytorch as det_torch
from model_def import DigitsTrial


def probe_inputs() -> torch.Tensor:
    return torch.rand(8, 64, generator=torch.Generator().manual_seed(1234)) * 16


class PredictionProbe(det_torch.PyTorchCallback):
    """Checkpointed state: the model's predictions at checkpoint time, also written to probe_dir."""

    def __init__(self, trial: "ProbedDigitsTrial") -> None:
        self.trial = trial

    def state_dict(self):
        model = self.trial.model
        was_training = model.training
        model.eval()
        with torch.no_grad():
            outputs = model(probe_inputs()).tolist()
        model.train(was_training)
        context = self.trial.context
        out = pathlib.Path(context.get_hparam("probe_dir")) / f"{context.get_trial_id()}-{self.trial.batches}.json"
        out.write_text(json.dumps(outputs))
        return {"batches": self.trial.batches}


class ProbedDigitsTrial(DigitsTrial):
    def __init__(self, context) -> None:
        super().__init__(context)
        self.batches = 0

    def build_callbacks(self):
        return {"probe": PredictionProbe(self)}

    def train_batch(self, batch, epoch_idx, batch_idx):
        self.batches = batch_idx + 1
        return super().train_batch(batch, epoch_idx, batch_idx)
'''

# A checkpoint every 10 batches (policy all), a validation every 20: checkpoints at 10 and 30 have none.
LENGTH = 40
CHECKPOINT_PERIOD = 10
VALIDATION_PERIOD = 20


@dataclasses.dataclass
class Trained:
    data_dir: pathlib.Path
    experiment_id: int
    probe_dir: pathlib.Path
    model_dir: pathlib.Path

    def predictions(self, trial_id: int, batches: int) -> torch.Tensor:
        return torch.tensor(json.loads((self.probe_dir / f"{trial_id}-{batches}.json").read_text()))


def probe_inputs() -> torch.Tensor:
    return torch.rand(8, 64, generator=torch.Generator().manual_seed(1234)) * 16


def train(root: pathlib.Path, max_trials: int = 3, length: int = LENGTH, extra: Optional[Dict[str, Any]] = None) -> Trained:
    """Run one experiment of the probed digits trial through `det experiment create` into root/det-data."""
    data_dir = root / "det-data"
    probe_dir = root / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    model_dir = copy_example(root)
    (model_dir / "ckpt_probe.py").write_text(PROBE_MODULE)
    cfg = small_config(
        root,
        entrypoint="ckpt_probe:ProbedDigitsTrial",
        searcher={"max_trials": max_trials, "max_length": {"batches": length}},
        hyperparameters={"probe_dir": {"type": "const", "val": str(probe_dir)},
                         "hidden_size": {"type": "int", "minval": 16, "maxval": 48}},
        min_validation_period={"batches": VALIDATION_PERIOD},
        min_checkpoint_period={"batches": CHECKPOINT_PERIOD},
        checkpoint_policy="all",
        scheduling_unit=CHECKPOINT_PERIOD,
        # Keep every checkpoint when the experiment ends, so that tests see all of them.
        checkpoint_storage={"type": "shared_fs", "host_path": str(data_dir), "storage_path": "checkpoints",
                            "save_trial_latest": 100},
        **(extra or {}),
    )
    proc = det("experiment", "create", str(cfg), str(model_dir), env={"DET_DATA_DIR": str(data_dir)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("Created experiment"))
    return Trained(data_dir, int(line.split()[2]), probe_dir, model_dir)


_shared: List[Trained] = []


def shared() -> Trained:
    """The session's shared experiment (trained on first use). Tests must not delete its checkpoints."""
    if not _shared:
        root = pathlib.Path(tempfile.mkdtemp(prefix="det-client-tests-"))
        atexit.register(shutil.rmtree, root, True)
        _shared.append(train(root))
    return _shared[0]
