"""A DeepSpeed Trainer API script of the tests (uploaded as `train.py` next to `_ds_trials.py`), written as a
Determined 0.38 user writes one: it runs as `python train.py` with no platform and, unchanged, as an experiment's
entrypoint (`python3 train.py`, or under `python3 -m determined.launch.deepspeed`). It trains the MLPTrial of
_ds_trials.py (a DeepSpeed engine, 2 micro batches of 4 records per batch) for `--batches` batches.

Hyperparameters (the trial's; off the platform `--record DIR` gives record_dir): those of _ds_trials.MLPTrial, and
`wait_at` (on the first run only: at that batch, wait for the platform to ask the trial to stop, so that a test can
pause it there). Prints `train: final weights <digest>` on the chief at the end.
"""
import argparse
import hashlib
import logging
import time
from typing import Any, Dict, List, Optional

import determined as det
from determined import pytorch
from determined.pytorch import deepspeed as det_ds

import _ds_trials


class WaitForPause(pytorch.PyTorchCallback):
    def __init__(self, context: det_ds.DeepSpeedTrialContext, at: int) -> None:
        self.context = context
        self.at = at

    def on_training_workload_end(self, avg_metrics: Dict[str, Any], batch_metrics: Any) -> None:
        if avg_metrics["batches"] != self.at:
            return
        print(f"train: waiting to be paused at batch {self.at}", flush=True)
        deadline = time.monotonic() + 90
        while not self.context.core.preempt.should_preempt() and time.monotonic() < deadline:
            time.sleep(0.05)


class PausableMLPTrial(_ds_trials.MLPTrial):
    def __init__(self, context: det_ds.DeepSpeedTrialContext, wait: bool) -> None:
        super().__init__(context)
        self.wait = wait

    def build_callbacks(self) -> Dict[str, pytorch.PyTorchCallback]:
        callbacks = super().build_callbacks()
        at = self.hparams.get("wait_at")
        if at and self.wait:
            callbacks["wait"] = WaitForPause(self.context, at)
        return callbacks


def weights_digest(engine: Any) -> str:
    """A digest of the engine's weights: equal digests, equal weights (bit for bit)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(engine.module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--resume")
    parser.add_argument("--record")
    args = parser.parse_args(argv)
    info = det.get_cluster_info()
    if info is None:
        hparams: Dict[str, Any] = {"record_dir": args.record}
        latest_checkpoint = args.resume
    else:
        hparams = info.trial.hparams
        latest_checkpoint = info.latest_checkpoint
    with det_ds.init(hparams=hparams) as context:
        digest = train(context, args.batches, latest_checkpoint)
        if context.distributed.rank == 0:
            print(f"train: final weights {digest}", flush=True)


def train(context: det_ds.DeepSpeedTrialContext, batches: int, latest_checkpoint: Optional[str]) -> str:
    """Train to `batches` batches, validating and checkpointing every 4; the digest of the final weights."""
    trial = PausableMLPTrial(context, wait=latest_checkpoint is None)
    trainer = det_ds.Trainer(trial, context)
    trainer.fit(max_length=pytorch.Batch(batches), validation_period=pytorch.Batch(4),
                checkpoint_period=pytorch.Batch(4), reporting_period=pytorch.Batch(2), checkpoint_policy="none",
                latest_checkpoint=latest_checkpoint)
    return weights_digest(trial.engine)


if __name__ == "__main__":
    main()
