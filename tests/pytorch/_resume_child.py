"""Run a test trial in a fresh process, resuming from a checkpoint: argv = trial ckpt_dir length uuid steps."""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import _trials  # noqa: E402
from _pytorch_runs import make_config, run_trial  # noqa: E402

if __name__ == "__main__":
    trial_name, ckpt_dir, length, uuid, steps = sys.argv[1:6]
    context = run_trial(
        getattr(_trials, trial_name),
        pathlib.Path(ckpt_dir),
        [int(length)],
        make_config(),
        latest_checkpoint=uuid,
        steps_completed=int(steps),
    )
    print("RESULT " + json.dumps({
        "checkpoints": [c["uuid"] for c in context.checkpoint.reported],
        "training": context.train.training_history,
    }))
