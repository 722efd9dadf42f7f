"""The Native API for tf.keras: a plain Keras script becomes an experiment.

    python train_native.py           # an adaptive search (embedded master, or the master at DET_MASTER)
    python train_native.py --test    # one batch, a validation and a checkpoint, in this process; stores nothing

Run it from this directory. Inside each trial the platform runs this script again: `init()` then returns
that trial's context, and `model.fit()` trains the trial.
"""
import sys

import determined as det
from determined.experimental.keras import Mode, init

from data import load_split
from model_def import build_iris_model, compile_iris_model

config = {
    "description": "iris tf.keras (Native API)",
    "hyperparameters": {
        "global_batch_size": det.Constant(16),
        "learning_rate": det.Log(-2.5, -1, base=10),
        "hidden_units": det.Integer(8, 48),
    },
    "searcher": {
        "name": "random",
        "max_trials": 2,
        "metric": "val_categorical_accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 200},
    },
    "min_validation_period": {"batches": 100},
}

if __name__ == "__main__":
    mode = Mode.LOCAL if "--test" in sys.argv[1:] else Mode.CLUSTER
    context = init(config, mode=mode, context_dir=".")
    model = context.wrap_model(build_iris_model(context.get_hparam("hidden_units")))
    compile_iris_model(model, context.get_hparam("learning_rate"))
    x_train, y_train = load_split("train")
    result = model.fit(
        x_train,
        y_train,
        batch_size=context.get_per_slot_batch_size(),
        epochs=20,
        validation_data=load_split("validation"),
    )
    # Reached only in LOCAL mode: fit() returns a summary of the test.
    print("test mode passed:", result)
