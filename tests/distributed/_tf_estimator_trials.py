"""An EstimatorTrial for the distributed tests (importable by the worker processes: this dir is on sys.path)."""
from typing import Any, Dict

import numpy as np
import tensorflow as tf

from determined import estimator

TRAIN_RECORDS = 64
VALIDATION_RECORDS = 41  # per-slot batches of 4: 21 records (6 batches) on rank 0, 20 (5 batches) on rank 1
WEIGHTS = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)


def regression_data(records: int, seed: int) -> "tuple[np.ndarray, np.ndarray]":
    x = np.random.RandomState(seed).randn(records, 3).astype(np.float32)
    return x, (x @ WEIGHTS + 0.25).astype(np.float32)


def serving_fn() -> tf.estimator.export.ServingInputReceiver:
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


class LinearTrial(estimator.EstimatorTrial):
    """Linear regression with plain SGD and a custom model_fn; `records` counts validation records with a
    make_metric SUM across slots."""

    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context

    def build_estimator(self) -> tf.estimator.Estimator:
        context = self.context
        lr = context.get_hparam("lr")

        def model_fn(features: Dict[str, tf.Tensor], labels: tf.Tensor, mode: str) -> tf.estimator.EstimatorSpec:
            weights = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
            bias = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
            predictions = tf.matmul(features["x"], weights) + bias
            if mode == tf.estimator.ModeKeys.PREDICT:
                return tf.estimator.EstimatorSpec(mode, predictions={"y": predictions})
            loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
            if mode == tf.estimator.ModeKeys.EVAL:
                records = context.experimental.make_metric(tf.shape(labels)[0], np.sum, np.float32)
                return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"records": records})
            optimizer = context.wrap_optimizer(tf.compat.v1.train.GradientDescentOptimizer(lr))
            train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

        return tf.estimator.Estimator(model_fn=model_fn)

    def _input_fn(self, records: int, seed: int) -> Any:
        def input_fn() -> tf.data.Dataset:
            x, y = regression_data(records, seed)
            dataset = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices(({"x": x}, y)))
            return dataset.batch(self.context.get_per_slot_batch_size())

        return input_fn

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(self._input_fn(TRAIN_RECORDS, 0))

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(self._input_fn(VALIDATION_RECORDS, 1), steps=None)

    def build_serving_input_receiver_fns(self) -> Dict[str, Any]:
        return {"raw": serving_fn}
