"""A batch inference script for tests/batch_inference: every item of a dataset of indices goes through a
TorchBatchProcessor, which appends a JSON line per batch to `<out>/items.jsonl` (run, rank, batch_idx, items)
and stores a file per batch through `context.upload_path()`. Hyperparameters: `out`, `records`, `batch_size`,
`interval`, `die_at` (rank 1 exits with 137 before that batch_idx in the trial's first run), `hold_at` (after
that batch_idx the first run waits until the platform asks the trial to stop: a test pauses it there)."""
import json
import os
import pathlib
import time

import torch

import determined as det
from determined import pytorch
from determined.pytorch import experimental

HPARAMS = det.get_cluster_info().trial.hparams
RUN = int(os.environ.get("DET_TRIAL_RUN_ID") or 0)
OUT = pathlib.Path(HPARAMS["out"])


def total(values):
    return sum(values)


class Writer(experimental.TorchBatchProcessor):
    def __init__(self, context):
        self.context = context
        self.rank = context.get_distributed_rank()
        self.model = context.prepare_model_for_inference(torch.nn.Linear(1, 1))
        self.items = context.wrap_reducer(total, name="items")
        self.flushes = 0

    def process_batch(self, batch, batch_idx):
        if HPARAMS.get("die_at") == batch_idx and self.rank == 1 and RUN == 1:
            print(f"infer: rank 1 dies before batch {batch_idx}", flush=True)
            os._exit(137)
        (indices,) = batch
        indices = self.context.to_device(indices)
        with torch.no_grad():
            self.model(indices.float().unsqueeze(1))
        items = indices.tolist()
        with open(OUT / "items.jsonl", "a") as f:
            f.write(json.dumps({"run": RUN, "rank": self.rank, "batch_idx": batch_idx, "items": items}) + "\n")
        with self.context.upload_path() as path:
            (path / f"batch_{batch_idx}.json").write_text(json.dumps(items))
        self.items.update(len(items))
        if HPARAMS.get("hold_at") == batch_idx and RUN == 1:
            (OUT / "ready").touch()
            deadline = time.monotonic() + 120
            # Test-only: hold here until the pause request reaches the trial, so that it stops at the next checkpoint.
            while not self.context._core_context.preempt.should_preempt(auto_ack=False):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)

    def on_checkpoint_start(self):
        self.flushes += 1

    def on_finish(self):
        (OUT / f"finished_rank_{self.rank}_run_{RUN}").write_text(str(self.flushes))
        self.context.report_metrics("inference", steps_completed=self.rank, metrics={"flushes": self.flushes})


if __name__ == "__main__":
    dataset = torch.utils.data.TensorDataset(torch.arange(HPARAMS["records"]))
    experimental.torch_batch_process(Writer, dataset, batch_size=HPARAMS["batch_size"],
                                     checkpoint_interval=HPARAMS["interval"])
