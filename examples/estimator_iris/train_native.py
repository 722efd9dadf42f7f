"""The Native API for tf.estimator: an experiment created from a plain script.

    python train_native.py           # a random search of 2 trials (embedded master, or DET_MASTER)
    python train_native.py --test    # one batch, a validation and a checkpoint, in-process; stores nothing

Run it from this directory. Inside each trial the platform re-runs this script: init() returns the
trial's context and tf.estimator.train_and_evaluate() trains that trial.
"""
import sys

import tensorflow as tf

import determined as det
from determined.experimental import estimator as det_estimator
from model_def import build_classifier, make_input_fn, serving_input_receiver_fn

config = {
    "description": "iris DNNClassifier (Native API)",
    "hyperparameters": {
        "global_batch_size": det.Constant(16),
        "learning_rate": det.Log(-2, -1.3, base=10),
        "hidden_units": det.Integer(8, 16),
    },
    "searcher": {
        "name": "random",
        "max_trials": 2,
        "metric": "accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 100},
    },
    "records_per_epoch": 120,
}

if __name__ == "__main__":
    mode = det_estimator.Mode.LOCAL if "--test" in sys.argv[1:] else det_estimator.Mode.CLUSTER
    context = det_estimator.init(config, mode=mode, context_dir=".")
    context.serving_input_receiver_fns = {"serving": serving_input_receiver_fn}
    metrics, _ = tf.estimator.train_and_evaluate(
        build_classifier(context),
        tf.estimator.TrainSpec(make_input_fn(context, train=True)),
        tf.estimator.EvalSpec(make_input_fn(context, train=False)),
    )
    print(f"test mode passed: accuracy {metrics['accuracy']:.3f}")
