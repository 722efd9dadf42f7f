"""The Native API: an experiment created from a plain Python script.

    python train_native.py           # a random search of 4 trials (embedded master, or DET_MASTER)
    python train_native.py --test    # one batch, a validation and a checkpoint, in-process; stores nothing

Run it from this directory. Inside each trial the platform re-runs this script, and `create()` trains that trial.
"""
import sys

import determined as det
from determined.experimental import create
from model_def import DigitsTrial

config = {
    "description": "digits MLP (Native API)",
    "hyperparameters": {
        "global_batch_size": det.Constant(32),
        "learning_rate": det.Log(-4, -2, base=10),
        "hidden_size": det.Integer(16, 256),
        "dropout": det.Double(0.0, 0.5),
    },
    "searcher": {
        "name": "random",
        "max_trials": 4,
        "metric": "validation_accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 2000},
    },
    "min_validation_period": {"batches": 1000},
}

if __name__ == "__main__":
    if "--test" in sys.argv[1:]:
        create(DigitsTrial, config, local=True, test=True)
    else:
        create(DigitsTrial, config, context_dir=".")
