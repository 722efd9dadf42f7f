"""A tiny trial written against `determined.core`, run by the UI tests' master in place of the harness.

It trains nothing: the loss follows its hyperparameters (`x` matters, `noise` barely), so importance, learning
curves and ASHA promotions are predictable. Hyperparameters: `x`, `noise` (or `extra.noise`, nested), `sleep` (seconds per batch) and
`report_every` (batches per training report).
"""
import json
import math
import time

from determined import core


def loss_at(x: float, noise: float, steps: int) -> float:
    return (x - 0.3) ** 2 + 1.0 / math.sqrt(steps) + 0.001 * noise


def main() -> None:
    with core.init() as ctx:
        hp = ctx.info.hparams
        x, noise = float(hp["x"]), float((hp.get("extra") or {}).get("noise", hp.get("noise", 0.0)))
        sleep, every = float(hp.get("sleep", 0.0)), int(hp.get("report_every", 2))
        steps = ctx.info.steps_completed
        print(f"trial {ctx.info.trial_id} starts at batch {steps}", flush=True)

        def checkpoint() -> None:
            with ctx.checkpoint.store_path({"steps_completed": steps, "x": x}) as (path, _):
                (path / "state.json").write_text(json.dumps({"steps": steps, "x": x}))

        for op in ctx.searcher.operations():
            while steps < op.length:
                steps += 1
                time.sleep(sleep)
                if steps % every == 0 or steps == op.length:
                    loss = loss_at(x, noise, steps)
                    ctx.train.report_training_metrics(steps, {"loss": loss, "lr": 0.1})
                    print(f"batch {steps}: loss {loss:.4f}", flush=True)
                if ctx.preempt.should_preempt():
                    checkpoint()
                    print(f"trial {ctx.info.trial_id} paused at batch {steps}", flush=True)
                    return
            metric = loss_at(x, noise, steps)
            ctx.train.report_validation_metrics(steps, {"validation_loss": metric, "accuracy": 1 - metric / 2})
            ctx.train.report_metrics("inference", steps, {"latency_ms": 1 + x})  # a group of its own (0.26+)
            checkpoint()
            op.report_completed(metric)


if __name__ == "__main__":
    main()
