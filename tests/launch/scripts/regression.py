"""A script trial of the tests: linear regression by SGD in pure Python, as a Determined 0.38 Core API script.

It resumes from `det.get_cluster_info().latest_checkpoint`, checkpoints every 10 steps, and when the platform
asks it to stop (pause, Ctrl-C) it checkpoints and exits 0. Usage: python3 regression.py [STEPS]
"""
import json
import logging
import os
import random
import sys
import time

import determined as det
from determined import core

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
info = det.get_cluster_info()
assert info is not None, "run me as an experiment's entrypoint"
hparams = info.trial.hparams
steps_total = int(sys.argv[1]) if len(sys.argv) > 1 else 40
print(f"script: interpreter {sys.executable} cwd {os.getcwd()} trial {info.trial.trial_id} hparams {hparams}",
      flush=True)
data = [(x / 10, 3 * x / 10 + 1) for x in range(-10, 11)]
rng = random.Random(info.trial.trial_seed)
w, b, step = 0.0, 0.0, 0


def loss() -> float:
    return sum((w * x + b - y) ** 2 for x, y in data) / len(data)


with core.init() as ctx:
    def save() -> None:
        with ctx.checkpoint.store_path({"steps_completed": step}) as (path, _):
            (path / "state.json").write_text(json.dumps({"w": w, "b": b, "step": step, "rng": rng.getstate()}))

    if info.latest_checkpoint:
        with ctx.checkpoint.restore_path(info.latest_checkpoint) as path:
            state = json.loads((path / "state.json").read_text())
        w, b, step = state["w"], state["b"], state["step"]
        rng.setstate((state["rng"][0], tuple(state["rng"][1]), state["rng"][2]))
        print(f"script: resumed from {info.latest_checkpoint} at step {step}", flush=True)
    while step < steps_total:
        x, y = rng.choice(data)
        error = w * x + b - y
        w -= hparams["lr"] * error * x
        b -= hparams["lr"] * error
        step += 1
        time.sleep(hparams.get("sleep", 0))
        if step % 5 == 0:
            ctx.train.report_training_metrics(step, {"loss": loss()})
        if step % 10 == 0:
            save()
        if ctx.preempt.should_preempt():
            save()
            print(f"script: stopping at step {step}, the platform asked", flush=True)
            sys.exit(0)
    ctx.train.report_validation_metrics(step, {"loss": loss()})
print(f"script: done at step {step}, loss {loss():.4f}", flush=True)
