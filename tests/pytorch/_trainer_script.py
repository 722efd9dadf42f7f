"""A Trainer API script of the tests (uploaded as `train.py`), written as a Determined 0.38 user writes one: it runs
as `python train.py` with no platform and, unchanged, as an experiment's entrypoint (also under
`python3 -m determined.launch.torch_distributed`). It fits y = 3x + 1 with a linear model.

Hyperparameters (from the trial, or the defaults off the platform): `lr`, `epochs`, and `wait_at` (on the first
run only: at that batch, wait for the platform to ask the trial to stop, so that a test can pause it there).
Arguments off the platform: `--batches N` (max_length in batches instead of epochs), `--resume UUID`.
"""
import argparse
import logging
import time
from typing import Any, Dict

import torch

import determined as det
from determined import pytorch


class WaitForPause(pytorch.PyTorchCallback):
    def __init__(self, context: pytorch.PyTorchTrialContext, at: int) -> None:
        self.context = context
        self.at = at

    def on_training_workload_end(self, avg_metrics: Dict[str, Any], batch_metrics: Any) -> None:
        if avg_metrics["batches"] != self.at:
            return
        print(f"train: waiting to be paused at batch {self.at}", flush=True)
        deadline = time.monotonic() + 60
        while not self.context.core.preempt.should_preempt() and time.monotonic() < deadline:
            time.sleep(0.05)


class RegressionTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext, hparams: Dict[str, Any], wait: bool = False) -> None:
        self.context = context
        self.hparams = hparams
        self.wait = wait
        torch.manual_seed(1)
        self.model = context.wrap_model(torch.nn.Linear(1, 1))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=hparams["lr"]))
        x = torch.linspace(-1, 1, 64).unsqueeze(1)
        self.data = torch.utils.data.TensorDataset(x, 3 * x + 1)

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.data, batch_size=8, shuffle=True)

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.data, batch_size=16)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y).item()}

    def build_callbacks(self) -> Dict[str, pytorch.PyTorchCallback]:
        at = self.hparams.get("wait_at")
        return {"wait": WaitForPause(self.context, at)} if at and self.wait else {}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int)
    parser.add_argument("--resume")
    args = parser.parse_args()
    info = det.get_cluster_info()
    if info is None:
        hparams: Dict[str, Any] = {"lr": 0.1, "epochs": 3}
        latest_checkpoint = args.resume
    else:
        hparams = info.trial.hparams
        latest_checkpoint = info.latest_checkpoint
    if args.batches:
        max_length: pytorch.TrainUnit = pytorch.Batch(args.batches)
    else:
        max_length = pytorch.Epoch(hparams["epochs"])
    with pytorch.init() as context:
        trial = RegressionTrial(context, hparams, wait=latest_checkpoint is None)
        trainer = pytorch.Trainer(trial, context)
        trainer.fit(max_length=max_length, validation_period=pytorch.Epoch(1), reporting_period=pytorch.Batch(4),
                    checkpoint_policy="all", latest_checkpoint=latest_checkpoint)
        weight, bias = (float(p.detach()) for p in context.models[0].parameters())
        if context.distributed.rank == 0:
            print(f"train: seed {context.get_trial_seed()} final weight {weight!r} bias {bias!r}", flush=True)


if __name__ == "__main__":
    main()
