"""Iris with a premade tf.estimator.DNNClassifier, as an EstimatorTrial.

Every checkpoint holds the Estimator's checkpoint and a SavedModel under `serving/`, loadable with
`Checkpoint.load()`.
"""
import os
from typing import Any, Callable, Dict

import numpy as np
import tensorflow as tf

from data import CLASSES, FEATURES, iris_split
from determined import estimator


class CheckpointNoteHook(estimator.RunHook):
    """Writes the trial's hyperparameters into every checkpoint (a RunHook beside the Estimator's own hooks)."""

    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self._context = context

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "hparams.txt"), "w") as fp:
            fp.write(repr(self._context.get_hparams()))


def make_input_fn(context: Any, train: bool) -> Callable[[], tf.data.Dataset]:
    def input_fn() -> tf.data.Dataset:
        features, labels = iris_split(train)
        dataset = context.wrap_dataset(tf.data.Dataset.from_tensor_slices(({"x": features}, labels)))
        if train:
            dataset = dataset.shuffle(len(labels), seed=context.get_trial_seed())
        return dataset.batch(context.get_per_slot_batch_size())

    return input_fn


def serving_input_receiver_fn() -> tf.estimator.export.ServingInputReceiver:
    x = tf.compat.v1.placeholder(tf.float32, [None, FEATURES], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def build_classifier(context: Any) -> tf.estimator.Estimator:
    optimizer = context.wrap_optimizer(
        tf.keras.optimizers.legacy.Adam(learning_rate=context.get_hparam("learning_rate"))
    )
    return tf.estimator.DNNClassifier(
        feature_columns=[tf.feature_column.numeric_column("x", shape=(FEATURES,))],
        hidden_units=[context.get_hparam("hidden_units")] * 2,
        n_classes=CLASSES,
        optimizer=optimizer,
    )


class IrisTrial(estimator.EstimatorTrial):
    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context

    def build_estimator(self) -> tf.estimator.Estimator:
        return build_classifier(self.context)

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(make_input_fn(self.context, train=True), hooks=[CheckpointNoteHook(self.context)])

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(make_input_fn(self.context, train=False), steps=None)

    def build_serving_input_receiver_fns(self) -> Dict[str, Callable[..., Any]]:
        return {"serving": serving_input_receiver_fn}


def predict(model: Any, features: np.ndarray) -> np.ndarray:
    """Class ids predicted by a SavedModel that Checkpoint.load() returned."""
    outputs = model.signatures["predict"](x=tf.constant(features, dtype=tf.float32))
    return outputs["class_ids"].numpy().reshape(-1)
