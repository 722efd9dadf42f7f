"""Runs of the test DeepSpeedTrial with a local core context, in a process of their own (DeepSpeed's process group
must not outlive them in the test process). argv: RUN... where RUN is `CKPT_DIR:LENGTH` (from scratch) or
`CKPT_DIR:LENGTH@UUID@STEPS` (resuming from a checkpoint). Prints one `RESULT <json>` line per run."""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "pytorch"))

import _ds_trials  # noqa: E402
from _pytorch_runs import make_config, run_trial  # noqa: E402

if __name__ == "__main__":
    config = make_config(entrypoint="_ds_trials:MLPTrial", hyperparameters={}, min_validation_period={"batches": 4},
                         min_checkpoint_period={"batches": 4}, scheduling_unit=2)
    for run in sys.argv[1:]:
        ckpt_dir, _, run = run.rpartition(":")
        length, _, rest = run.partition("@")
        uuid, _, steps = rest.partition("@")
        context = run_trial(_ds_trials.MLPTrial, pathlib.Path(ckpt_dir), [int(length)], config, hparams={}, seed=5,
                            latest_checkpoint=uuid or None, steps_completed=int(steps or 0))
        print("RESULT " + json.dumps({
            "checkpoints": [c["uuid"] for c in context.checkpoint.reported],
            "training": context.train.training_history,
            "validation": context.train.validation_history,
        }), flush=True)
