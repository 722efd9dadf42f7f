"""A tiny Core API trial for the scheduling tests: the loss follows `x` and the batch; at batch `gate_at` it waits
until the file `gate` exists (checking the preemption signal meanwhile), so a test decides when it goes on."""
import json
import os
import time

from determined import core


def main() -> None:
    with core.init() as ctx:
        hp = ctx.info.hparams
        x, gate, gate_at = float(hp["x"]), str(hp.get("gate", "")), int(hp.get("gate_at", 0))
        steps = ctx.info.steps_completed

        def checkpoint() -> None:
            with ctx.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                (path / "state.json").write_text(json.dumps({"steps": steps}))

        for op in ctx.searcher.operations():
            while steps < op.length:
                while gate and steps == gate_at and not os.path.exists(gate):
                    if ctx.preempt.should_preempt():
                        checkpoint()
                        return
                    time.sleep(0.05)
                steps += 1
                ctx.train.report_training_metrics(steps, {"loss": (x - 0.3) ** 2 + 1.0 / steps})
                if ctx.preempt.should_preempt():
                    checkpoint()
                    return
            ctx.train.report_validation_metrics(steps, {"validation_loss": (x - 0.3) ** 2 + 1.0 / steps})
            checkpoint()
            op.report_completed((x - 0.3) ** 2 + 1.0 / steps)


if __name__ == "__main__":
    main()
