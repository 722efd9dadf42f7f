"""Overhead of PyTorchTrial and of the Trainer API over a hand-written torch training loop (and Determined 0.38.1's).

The same MLP, the same digits data, the same number of batches, batch size and shuffling, one validation
and one checkpoint at the end, in four ways:

* ``hand``: a plain torch loop (DataLoader, forward, backward, step; loss averaged every 100 batches);
* ``det``: this project's PyTorchTrial, driven by PyTorchTrialController with a local core context
  (metrics reported every scheduling_unit=100 batches, no checkpoint but the final one);
* ``trainer``: this project's Trainer API (``det.pytorch.init()`` + ``Trainer.fit``, the same code as the next
  column), run in this process;
* ``det-0.38.1``: the PyPI package determined==0.38.1 (``det.pytorch.init()`` + ``Trainer.fit``), in its own
  venv ``benchmarks/.venv-det`` (created when missing), run from a temporary directory holding only this
  script. When it cannot be set up, the reason is printed and the column is skipped.

Run: ``.venv/bin/python benchmarks/pytorch_overhead.py [--batches 3000] [--repeats 5] [--no-det038]``.
On a GPU: ``--device cuda`` (every column trains on cuda:0; PyTorchTrial and the Trainer pick it themselves, the
hand loop moves the model and each batch as a user does); ``--hidden``/``--batch-size`` give the MLP more work.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
DET038_VENV = HERE / ".venv-det"
DET038_PACKAGES = ["determined==0.38.1", "tensorboard", "torch==2.13.0"]
HPARAMS = {"global_batch_size": 32, "learning_rate": 0.001, "hidden_size": 64, "dropout": 0.2}
# What a run is timed with: wall time (the default), or with --cpu the CPU time of the process (every thread of
# it), which another job on the machine slows much less than wall time (the det 0.38.1 column included).
CLOCK: Callable[[], float] = time.perf_counter
REPORT_EVERY = 100
SEED = 7
DEVICE = torch.device("cpu")


def _sync() -> None:
    """Wait for the GPU's queued work, so that a run's time includes it."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def build_mlp(hidden_size: int, dropout: float) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden_size), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden_size, 10))


def datasets(arrays: Dict[str, np.ndarray]) -> Tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    def ds(x: np.ndarray, y: np.ndarray) -> torch.utils.data.TensorDataset:
        return torch.utils.data.TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64))

    return ds(arrays["x_train"], arrays["y_train"]), ds(arrays["x_val"], arrays["y_val"])


def digits_arrays() -> Dict[str, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0
    return {"x_train": (x_train - mean) / std, "y_train": y_train, "x_val": (x_val - mean) / std, "y_val": y_val}


# -- 1. a hand-written loop ----------------------------------------------------------------------------


def run_hand(arrays: Dict[str, np.ndarray], batches: int, ckpt_dir: str) -> float:
    torch.manual_seed(SEED)
    start = CLOCK()
    train, val = datasets(arrays)
    model = build_mlp(HPARAMS["hidden_size"], HPARAMS["dropout"]).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=HPARAMS["learning_rate"])
    loss_fn = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(train, batch_size=HPARAMS["global_batch_size"], shuffle=True)
    losses: List[torch.Tensor] = []
    done = 0
    model.train()
    while done < batches:
        for features, labels in loader:
            if DEVICE.type != "cpu":
                features, labels = features.to(DEVICE, non_blocking=True), labels.to(DEVICE, non_blocking=True)
            loss = loss_fn(model(features), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.detach())
            done += 1
            if len(losses) == REPORT_EVERY or done == batches:
                per_batch = torch.stack(losses).tolist()
                _ = sum(per_batch) / len(per_batch)
                losses = []
            if done == batches:
                break
    model.eval()
    with torch.no_grad():
        accuracies = [
            (model(f.to(DEVICE)).argmax(1) == l.to(DEVICE)).float().mean()
            for f, l in torch.utils.data.DataLoader(val, batch_size=32)
        ]
        _ = torch.stack(accuracies).mean().item()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, os.path.join(ckpt_dir, "ckpt.pth"))
    _sync()
    return CLOCK() - start


# -- 2. this project's PyTorchTrial --------------------------------------------------------------------


def run_det(arrays: Dict[str, np.ndarray], batches: int, ckpt_dir: str) -> float:
    from determined import _execution, core
    from determined import config as det_config
    import determined.pytorch as det_torch

    class BenchTrial(det_torch.PyTorchTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
            self.context = context
            self.train_data, self.val_data = datasets(arrays)
            self.model = context.wrap_model(build_mlp(HPARAMS["hidden_size"], HPARAMS["dropout"]))
            self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=HPARAMS["learning_rate"]))
            self.loss_fn = nn.CrossEntropyLoss()

        def build_training_data_loader(self) -> det_torch.DataLoader:
            return det_torch.DataLoader(self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

        def build_validation_data_loader(self) -> det_torch.DataLoader:
            return det_torch.DataLoader(self.val_data, batch_size=32)

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
            features, labels = batch
            loss = self.loss_fn(self.model(features), labels)
            self.context.backward(loss)
            self.context.step_optimizer(self.optimizer)
            return {"loss": loss}

        def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
            features, labels = batch
            return {"accuracy": (self.model(features).argmax(1) == labels).float().mean()}

    config = det_config.load_experiment_config({
        "entrypoint": "pytorch_overhead:BenchTrial",
        "hyperparameters": HPARAMS,
        "searcher": {"name": "single", "metric": "accuracy", "max_length": {"batches": batches}},
        "scheduling_unit": REPORT_EVERY,
        "checkpoint_policy": "none",
    })
    start = CLOCK()
    with core._make_local_context(ckpt_dir, [batches], config, dict(HPARAMS), SEED) as core_context:
        _execution.run_trial(BenchTrial, core_context)
    _sync()
    return CLOCK() - start


# -- 3. the Trainer API: this project's in this process, Determined 0.38.1's inside benchmarks/.venv-det ----


def run_trainer_api(arrays: Dict[str, np.ndarray], batches: int, ckpt_dir: str) -> float:
    import determined.pytorch as dp

    class BenchTrial(dp.PyTorchTrial):
        def __init__(self, context: Any) -> None:
            self.context = context
            self.train_data, self.val_data = datasets(arrays)
            self.model = context.wrap_model(build_mlp(HPARAMS["hidden_size"], HPARAMS["dropout"]))
            self.optimizer = context.wrap_optimizer(torch.optim.Adam(self.model.parameters(), lr=HPARAMS["learning_rate"]))
            self.loss_fn = nn.CrossEntropyLoss()

        def build_training_data_loader(self) -> Any:
            return dp.DataLoader(self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

        def build_validation_data_loader(self) -> Any:
            return dp.DataLoader(self.val_data, batch_size=32)

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
            features, labels = batch
            loss = self.loss_fn(self.model(features), labels)
            self.context.backward(loss)
            self.context.step_optimizer(self.optimizer)
            return {"loss": loss}

        def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
            features, labels = batch
            return {"accuracy": (self.model(features).argmax(1) == labels).float().mean()}

    torch.manual_seed(SEED)
    start = CLOCK()
    os.chdir(ckpt_dir)  # local-mode checkpoints go under the working directory (0.38.1) or DET_DATA_DIR (here)
    os.environ["DET_DATA_DIR"] = ckpt_dir
    with dp.init(hparams=dict(HPARAMS), enable_tensorboard_logging=False) as train_context:
        trial = BenchTrial(train_context)
        trainer = dp.Trainer(trial, train_context)
        trainer.fit(
            max_length=dp.Batch(batches),
            reporting_period=dp.Batch(REPORT_EVERY),
            validation_period=dp.Batch(batches),
            checkpoint_period=dp.Batch(batches),
            checkpoint_policy="none",
        )
    _sync()
    return CLOCK() - start


def ensure_det038_venv() -> Tuple[Optional[pathlib.Path], str]:
    """The python of benchmarks/.venv-det (created when missing), or None and the reason it cannot be had."""
    python = DET038_VENV / "bin" / "python"
    if python.exists():
        check = subprocess.run([str(python), "-c", "import determined, torch; print(determined.__version__)"],
                               capture_output=True, text=True, cwd=tempfile.gettempdir())
        if check.returncode == 0 and check.stdout.strip() == "0.38.1":
            return python, ""
    base = shutil.which("python3.11")
    if base is None:
        return None, "python3.11 is not on PATH"
    print(f"creating {DET038_VENV} with {' '.join(DET038_PACKAGES)} (once) ...", flush=True)
    steps = [[base, "-m", "venv", str(DET038_VENV)], [str(python), "-m", "pip", "install", "-q", *DET038_PACKAGES]]
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True)
        if result.returncode != 0:
            return None, f"{' '.join(step[:4])} failed: {(result.stderr or result.stdout).strip()[-600:]}"
    return python, ""


def det038_times(arrays: Dict[str, np.ndarray], batches: int, repeats: int,
                 cpu: bool = False) -> Tuple[List[float], str]:
    python, why = ensure_det038_venv()
    if python is None:
        return [], why
    with tempfile.TemporaryDirectory(prefix="det038-bench-") as script_dir, \
            tempfile.TemporaryDirectory(prefix="det038-data-") as data_dir:
        script = pathlib.Path(script_dir) / pathlib.Path(__file__).name
        shutil.copy(__file__, script)
        data = pathlib.Path(data_dir) / "digits.npz"
        np.savez(data, **arrays)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_") and k != "PYTHONPATH"}
        result = subprocess.run(
            [str(python), str(script), "--column", "det038", "--data", str(data),
             "--batches", str(batches), "--repeats", str(repeats), "--threads", str(torch.get_num_threads()),
             "--device", DEVICE.type, "--hidden", str(HPARAMS["hidden_size"]),
             "--batch-size", str(HPARAMS["global_batch_size"]),
             *(["--cpu"] if cpu else [])],
            capture_output=True, text=True, cwd=script_dir, env=env,
        )
    if result.returncode != 0:
        return [], f"the determined 0.38.1 run failed:\n{(result.stderr or result.stdout)[-1500:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("TIMES ")]
    if not lines:
        return [], f"the determined 0.38.1 run printed no times:\n{result.stdout[-1500:]}"
    return [float(t) for t in lines[-1].split()[1:]], ""


def timed(run: Callable[[Dict[str, np.ndarray], int, str], float], arrays: Dict[str, np.ndarray], batches: int) -> float:
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as ckpt_dir:
        try:
            return run(arrays, batches, ckpt_dir)
        finally:
            os.chdir(cwd)  # the Trainer API runs in its checkpoint directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads for every column")
    parser.add_argument("--no-det038", action="store_true", help="skip the determined==0.38.1 column")
    parser.add_argument("--cpu", action="store_true",
                        help="time runs by the process's CPU time instead of wall time (for a machine with other jobs)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where every column trains (cuda: the first GPU; the det 0.38.1 column too)")
    parser.add_argument("--hidden", type=int, default=HPARAMS["hidden_size"], help="the MLP's hidden width")
    parser.add_argument("--batch-size", type=int, default=HPARAMS["global_batch_size"])
    parser.add_argument("--column", choices=["det038"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    global CLOCK, DEVICE
    HPARAMS["hidden_size"], HPARAMS["global_batch_size"] = args.hidden, args.batch_size
    if args.device == "cuda":
        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA GPU here")
        DEVICE = torch.device("cuda", 0)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # PyTorchTrial and the Trainer take a GPU whenever they see one
    if args.cpu:
        CLOCK = time.process_time

    if args.column == "det038":
        import logging

        logging.disable(logging.WARNING)
        arrays = dict(np.load(args.data))
        times = [timed(run_trainer_api, arrays, args.batches) for _ in range(args.repeats)]
        print("TIMES " + " ".join(f"{t:.6f}" for t in times))
        return

    sys.path.insert(0, str(HERE.parent))
    import logging

    logging.getLogger("determined").setLevel(logging.WARNING)
    arrays = digits_arrays()
    timed(run_hand, arrays, 200)  # warm-up: imports, allocator, first-call costs
    timed(run_det, arrays, 200)
    timed(run_trainer_api, arrays, 200)
    hand: List[float] = []
    det: List[float] = []
    trainer: List[float] = []
    columns = [(run_hand, hand), (run_det, det), (run_trainer_api, trainer)]
    for repeat in range(args.repeats):
        # Rotate which runs first, so that a drift in machine load hits every column alike.
        for run, times in columns[repeat % 3:] + columns[:repeat % 3]:
            times.append(timed(run, arrays, args.batches))
    det038: List[float] = []
    why = "skipped (--no-det038)"
    if not args.no_det038:
        det038, why = det038_times(arrays, args.batches, args.repeats, args.cpu)

    print(f"{args.batches} batches of {HPARAMS['global_batch_size']} on {DEVICE}, hidden {HPARAMS['hidden_size']}, "
          f"{args.repeats} repeats, "
          f"torch {torch.__version__}, {args.threads} thread(s); {'CPU ' if args.cpu else ''}seconds per run:")
    print(f"{'':10}{'hand loop':>12}{'PyTorchTrial':>14}{'Trainer':>10}{'det 0.38.1':>12}")
    for name, pick in (("min", min), ("median", statistics.median)):
        old = f"{pick(det038):12.3f}" if det038 else f"{'-':>12}"
        print(f"{name:10}{pick(hand):12.3f}{pick(det):14.3f}{pick(trainer):10.3f}{old}")
    for label, times in (("PyTorchTrial", det), ("Trainer API", trainer)):
        ratio = statistics.median(times) / statistics.median(hand)
        paired = statistics.median(d / h for d, h in zip(times, hand))
        print(f"{label} / hand loop: {ratio:.3f} (medians), {min(times) / min(hand):.3f} (minima), "
              f"{paired:.3f} (median of paired runs)  (target <= 1.05, goal <= 1.02)")
    print(f"Trainer API / PyTorchTrial (medians): {statistics.median(trainer) / statistics.median(det):.3f}")
    if det038:
        print(f"det 0.38.1 / hand loop (medians): {statistics.median(det038) / statistics.median(hand):.3f}")
    else:
        print(f"det 0.38.1 column: {why}")


if __name__ == "__main__":
    main()
