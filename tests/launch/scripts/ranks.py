"""A script trial of the tests run by `python3 -m determined.launch.torch_distributed` (no torch needed): the
ranks step together through det.core's collectives, the chief checkpoints every 10 steps, and in the trial's
first run rank 1 dies (SIGKILL) at step `hparams.die_at`, which must restart the trial from its checkpoint.
"""
import json
import os
import signal

import determined as det
from determined import core

info = det.get_cluster_info()
assert info is not None
hparams = info.trial.hparams
step = 0
with core.init() as ctx:
    rank = ctx.distributed.rank
    print(f"ranks: rank {rank} of {ctx.distributed.size} allgather {ctx.distributed.allgather(rank)}", flush=True)
    if info.latest_checkpoint:
        with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = json.loads((path / "state.json").read_text())["step"]
        print(f"ranks: rank {rank} resumed from {info.latest_checkpoint} at step {step}", flush=True)
    while step < hparams["steps"]:
        step += 1
        if rank == 1 and step == hparams["die_at"] and not info.latest_checkpoint:
            print("ranks: rank 1 dies", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        ctx.distributed.allgather(step)  # the ranks stay in step
        if step % 10 == 0 and rank == 0:
            ctx.train.report_training_metrics(step, {"loss": 1 / step})
            with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
    if rank == 0:
        ctx.train.report_validation_metrics(step, {"loss": 1 / step})
