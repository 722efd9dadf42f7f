"""A PyTorchTrial written for Determined 0.38, run through a `module:Class` entrypoint by the embedded master and
the real harness: the trial asks to stop and ends COMPLETED; its TensorBoard writer's scalars land in the
trial's event file next to the platform's metrics (what `det tensorboard start` serves); the 0.12 TorchWriter
name imports."""
import pathlib
from typing import Any, Dict

import pytest

from determined import master
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.master._helpers import model_def

pytestmark = pytest.mark.slow

MODEL = '''
from typing import Any, Dict

import torch
from torch import nn

from determined import pytorch
from determined.tensorboard.metric_writers.pytorch import TorchWriter


def data(records, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(records, 4, generator=generator)
    return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long())


class StopAt(pytorch.PyTorchCallback):
    def __init__(self, context):
        self.context = context
        self.records = 0

    def on_training_workload_end(self, avg_metrics, batch_metrics):
        self.records += avg_metrics["records"]
        if self.records >= 40:
            self.context.set_stop_requested(True)


class Records(pytorch.MetricReducer):
    def __init__(self):
        self.reset()

    def reset(self):
        self.count = 0

    def update(self, n):
        self.count += n

    def per_slot_reduce(self):
        return self.count

    def cross_slot_reduce(self, per_slot_metrics):
        return sum(per_slot_metrics)


class Trial038(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext, hparams: Dict[str, Any]) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(4, 2))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=hparams["lr"]))
        self.records = context.wrap_reducer(Records(), name="records", for_validation=False)
        self.writer = context.get_tensorboard_writer()
        self.legacy = TorchWriter()

    def build_callbacks(self):
        return {"stop": StopAt(self.context)}

    def build_training_data_loader(self):
        return pytorch.DataLoader(data(64, 0), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return pytorch.DataLoader(data(16, 1), batch_size=8)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        self.records.update(len(x))
        self.writer.add_scalar("custom/twice_batch", 2.0 * batch_idx, batch_idx)
        self.legacy.add_scalar("legacy/batch", float(batch_idx), batch_idx)
        return {"loss": loss}

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        return {"val_loss": nn.functional.cross_entropy(self.model(x), y), "batch_idx": batch_idx}
'''

CONFIG: Dict[str, Any] = {
    "entrypoint": "model_def:Trial038",
    "hyperparameters": {"global_batch_size": 8, "lr": 0.1},
    "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 50}},
    "scheduling_unit": 2,
    "max_restarts": 0,
}


def _scalars(directory: pathlib.Path) -> Dict[str, Dict[int, float]]:
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}


def test_a_038_trial_stops_itself_completed_and_writes_tensorboard_scalars(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    with master.start(data_dir, slots=Slots(gpus=[], cpu_count=1)) as em:
        s = em.session()
        exp_id = s.post("/experiments", {"config": CONFIG, "model_definition": model_def({"model_def.py": MODEL})})[
            "experiment"]["id"]
        terminal = ("COMPLETED", "ERROR", "CANCELED")
        wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] in terminal, timeout=240,
                 what="the experiment to end")
        described = s.get(f"/experiments/{exp_id}")
        [trial] = described["trials"]
        logs = "\n".join(line["message"] for line in s.get(f"/trials/{trial['id']}/logs")["logs"])
        assert described["experiment"]["state"] == "COMPLETED", logs
        # 8 records a batch, reports every 2 batches: the callback asks to stop once it counted 40 records.
        assert trial["state"] == "COMPLETED" and trial["total_batches"] == 6, logs
        assert "the trial asked to stop after 6 batches" in logs and "records/s" in logs
        detail = s.get(f"/trials/{trial['id']}")
        assert [m["metrics"]["records"] for m in detail["training_metrics"]] == [16, 16, 16]
        assert detail["checkpoints"][-1]["steps_completed"] == 6

    scalars = _scalars(data_dir / "tensorboard" / f"experiment_{exp_id}" / f"trial_{trial['id']}")
    assert scalars["custom/twice_batch"] == {b: 2.0 * b for b in range(6)}
    assert scalars["legacy/batch"] == {b: float(b) for b in range(6)}
    assert set(scalars["training/loss"]) == {2, 4, 6}  # the platform's metrics, in the same file
    assert scalars["training/records"] == {2: 16.0, 4: 16.0, 6: 16.0}
