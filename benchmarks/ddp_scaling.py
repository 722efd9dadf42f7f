"""Data-parallel scaling on CPU: throughput of 2 ranks / (2 x throughput of 1 rank), ours and torchrun's.

Two ways to train the same MLP (256 -> 512 -> 512 -> 10, SGD, random data held in memory) with a fixed
per-rank batch (weak scaling: 2 ranks train twice the records per step):

* ours: a PyTorchTrial driven by `PyTorchTrialController` with a local core context, its ranks started by
  `python -m determined.exec.launch` (gloo, DistributedDataParallel from `context.wrap_model`, the chief
  broadcasting the preemption decision every batch through the core collectives);
* baseline: a plain script started by `python -m torch.distributed.run` (torchrun): DDP, a
  DistributedSampler, forward/backward/step.

Each rank gets one CPU thread (OMP_NUM_THREADS=1), so on a machine with >= 2 idle cores the ideal ratio
is 1.0. Each configuration runs `--repeats` times; throughput (records/s) is measured by the chief between
the end of a warm-up and the last batch, and the median is used. The ratio printed for each is
throughput(2 ranks) / (2 x throughput(1 rank)).

Run: ``.venv/bin/python benchmarks/ddp_scaling.py [--batches 300] [--warmup 30] [--batch-size 64] [--repeats 3]``.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

REPO = pathlib.Path(__file__).resolve().parent.parent
FEATURES, HIDDEN, CLASSES, RECORDS = 256, 512, 10, 8192


def _model() -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, CLASSES))


def _dataset() -> Any:
    import torch

    generator = torch.Generator().manual_seed(1)
    x = torch.randn(RECORDS, FEATURES, generator=generator)
    return torch.utils.data.TensorDataset(x, torch.randint(0, CLASSES, (RECORDS,), generator=generator))


# -- ours: a PyTorchTrial under determined.exec.launch -------------------------------------------------

def _run_ours(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    import torch
    from torch import nn

    import determined.pytorch as det_torch
    from determined import _execution, core

    timing: Dict[str, float] = {}

    class Trial(det_torch.PyTorchTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
            self.context = context
            self.model = context.wrap_model(_model())
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))

        def build_training_data_loader(self) -> det_torch.DataLoader:
            return det_torch.DataLoader(_dataset(), batch_size=self.context.get_per_slot_batch_size(), shuffle=True)

        def build_validation_data_loader(self) -> det_torch.DataLoader:
            return det_torch.DataLoader(_dataset(), batch_size=256)

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
            if batch_idx == args.warmup:
                timing["start"] = time.perf_counter()
            x, y = batch
            loss = nn.functional.cross_entropy(self.model(x), y)
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            if batch_idx == args.batches - 1:
                timing["end"] = time.perf_counter()
            return {"loss": loss}

        def evaluate_full_dataset(self, data_loader: Any) -> Dict[str, Any]:
            return {"validation_loss": 0.0}

    distributed = core.DistributedContext.from_env()
    hparams = {"global_batch_size": args.batch_size * distributed.size}
    config = {"searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": args.batches}},
              "hyperparameters": {"global_batch_size": {"type": "const", "val": hparams["global_batch_size"]}},
              "scheduling_unit": 100, "checkpoint_policy": "none"}
    with tempfile.TemporaryDirectory() as tmp:
        with core.init(distributed=distributed, checkpoint_dir=tmp, lengths=[args.batches], config=config,
                       hparams=hparams) as context:
            _execution.run_trial(Trial, context)
    _report(distributed.rank, distributed.size, timing, args)


# -- baseline: a plain DDP script under torchrun --------------------------------------------------------

def _run_plain(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    model = nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dataset = _dataset()
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=size, rank=rank, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    timing: Dict[str, float] = {}
    batch_idx, epoch = 0, 0
    while batch_idx < args.batches:
        sampler.set_epoch(epoch)
        for x, y in loader:
            if batch_idx == args.warmup:
                timing["start"] = time.perf_counter()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            batch_idx += 1
            if batch_idx == args.batches:
                timing["end"] = time.perf_counter()
                break
        epoch += 1
    dist.destroy_process_group()
    _report(rank, size, timing, args)


def _report(rank: int, size: int, timing: Dict[str, float], args: argparse.Namespace) -> None:
    if rank == 0:
        records = (args.batches - args.warmup) * args.batch_size * size
        print("THROUGHPUT " + json.dumps({"records_per_s": records / (timing["end"] - timing["start"])}), flush=True)


# -- driver ------------------------------------------------------------------------------------------

def _measure(kind: str, nproc: int, args: argparse.Namespace) -> float:
    own = [__file__, "--role", kind, "--batches", str(args.batches), "--warmup", str(args.warmup),
           "--batch-size", str(args.batch_size)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    if kind == "ours":
        env["OMP_NUM_THREADS"] = str(nproc)  # the launcher gives each of its workers an equal share
        command = [sys.executable, "-m", "determined.exec.launch", "--nproc-per-node", str(nproc), "--",
                   sys.executable, *own]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *own]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if "THROUGHPUT " in line]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{kind} with {nproc} rank(s) failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    return float(json.loads(lines[-1].split("THROUGHPUT ", 1)[1])["records_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["driver", "ours", "plain"], default="driver", help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, default=300, help="batches per rank (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed batches first (default 30)")
    parser.add_argument("--batch-size", type=int, default=64, help="records per rank and batch (default 64)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.warmup >= args.batches:
        parser.error("--warmup must be smaller than --batches")
    if args.role == "ours":
        return _run_ours(args)
    if args.role == "plain":
        return _run_plain(args)

    print(f"per-rank batch {args.batch_size}, {args.batches} batches ({args.warmup} warm-up), "
          f"1 thread per rank, {os.cpu_count()} cores, median of {args.repeats}")
    results: Dict[str, Dict[int, List[float]]] = {"ours": {1: [], 2: []}, "torchrun": {1: [], 2: []}}
    for _ in range(args.repeats):
        for kind, role in (("ours", "ours"), ("torchrun", "plain")):
            for nproc in (1, 2):
                results[kind][nproc].append(_measure(role, nproc, args))
    print(f"{'':10} {'1 rank rec/s':>14} {'2 ranks rec/s':>14} {'2 / (2 x 1)':>12}")
    for kind, by_n in results.items():
        one, two = statistics.median(by_n[1]), statistics.median(by_n[2])
        print(f"{kind:10} {one:14.0f} {two:14.0f} {two / (2 * one):12.3f}")


if __name__ == "__main__":
    main()
