"""A Core API training script as Determined 0.38 users write them (no Trial class), for the tests of the Core API.

It fits y = 3x + 1 by gradient descent with numpy, one batch per step, and uses every part of `core`: training,
validation and custom metric groups, progress, status, metadata, checkpoints with store_path (resuming from the
trial's latest checkpoint with restore_path), preemption, and optionally the profiler and sharded checkpoints.
Hyperparameters say what to do: `steps`, `lr`, `sleep` (seconds per step), `invalid_hp` (raise det.InvalidHP),
`wait_dir` (after reporting progress 0.5 at half way, wait for a file `go` there), `profile`, `shard`, `tour` (at
the end, the chief reads its last checkpoint back with get_metadata, download and restore_path with a selector,
stores and deletes a scratch checkpoint, asks for the experiment's best validation and the TensorBoard path, and
keeps what it saw in the trial's metadata).
"""
import json
import pathlib
import time

import numpy as np

import determined as det
from determined import core


def main() -> None:
    with core.init() as ctx:
        hp = ctx.info.hparams
        if hp.get("invalid_hp"):
            raise det.InvalidHP("this learning rate never converges")
        steps, lr, rank = int(hp.get("steps", 8)), float(hp["lr"]), ctx.distributed.rank
        if hp.get("profile"):
            ctx.profiler.on(sampling_interval=0.1, samples_per_report=2)
        rng = np.random.default_rng(ctx.info.trial_seed)
        w = np.zeros(2)
        start = 0
        if ctx.info.latest_checkpoint:
            with ctx.checkpoint.restore_path(ctx.info.latest_checkpoint) as path:
                state = json.loads((path / "state.json").read_text())
            w, start = np.array(state["w"]), int(state["steps"])
        ctx.train.set_status(f"training from step {start}")
        for step in range(start + 1, steps + 1):
            x = rng.uniform(-1, 1, size=16)
            y = 3 * x + 1
            err = w[0] * x + w[1] - y
            w -= lr * np.array([np.mean(err * x), np.mean(err)])
            loss = float(np.mean(err**2))
            time.sleep(float(hp.get("sleep", 0)))
            ctx.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            val = float(np.mean((w[0] * np.linspace(-1, 1, 50) + w[1] - (3 * np.linspace(-1, 1, 50) + 1)) ** 2))
            ctx.train.report_validation_metrics(steps_completed=step, metrics={"validation_loss": val, "batches": step})
            ctx.train.report_metrics("weights", steps_completed=step, metrics={"w": float(w[0]), "b": float(w[1])})
            ctx.train.report_progress(step / steps)
            if hp.get("wait_dir") and step == steps // 2:
                while not (pathlib.Path(hp["wait_dir"]) / "go").exists():
                    time.sleep(0.05)
            if step % 4 == 0 or step == steps or ctx.preempt.should_preempt():
                checkpoint(ctx, w, step, bool(hp.get("shard")), rank)
                if ctx.preempt.should_preempt():
                    return
        ctx.train.set_metadata({"final_w": float(w[0])})
        if hp.get("tour") and rank == 0:
            tour(ctx, steps)


def tour(ctx: core.Context, steps: int) -> None:
    last = ctx.info.latest_checkpoint or ctx.train.get_metadata().get("last_checkpoint")
    json_only = lambda rel: rel.endswith(".json")  # noqa: E731
    ctx.checkpoint.download(last, "downloaded", core.DownloadMode.NoSharedDownload, selector=lambda r: r == "state.json")
    with ctx.checkpoint.restore_path(last, selector=json_only) as path:
        restored = sorted(p.name for p in path.iterdir())
    with ctx.checkpoint.store_path({"steps_completed": steps, "scratch": True}) as (path, scratch):
        (path / "scratch.txt").write_text("to be deleted")
    ctx.checkpoint.delete(scratch)
    ctx.train.set_metadata({"tour": {
        "metadata": ctx.checkpoint.get_metadata(last), "downloaded": sorted(p.name for p in pathlib.Path(
            "downloaded").iterdir()), "restored": restored, "scratch": scratch,
        "best": ctx.train.get_experiment_best_validation(), "tensorboard": str(ctx.train.get_tensorboard_path())}})


def checkpoint(ctx: core.Context, w: np.ndarray, step: int, shard: bool, rank: int) -> None:
    state = json.dumps({"w": list(w), "steps": step})
    if not shard:
        if rank == 0:
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, storage_id):
                (path / "state.json").write_text(state)
            ctx.train.set_metadata({"last_checkpoint": storage_id})
            with ctx.checkpoint.restore_path(storage_id) as path:  # what was stored reads back the same
                assert json.loads((path / "state.json").read_text())["w"] == list(w)
        return
    with ctx.checkpoint.store_path({"steps_completed": step, f"rank{rank}": True}, shard=True) as (path, _):
        (path / "state.json").write_text(state)  # every rank writes the same: kept once
        (path / f"rank{rank}.txt").write_text(f"rank {rank} at step {step}")


if __name__ == "__main__":
    main()
