"""Small Estimator trials for the tests: a premade DNNClassifier and a custom model_fn, on tiny blobs."""
import os
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf

from determined import config as det_config, estimator

N_TRAIN, N_VAL, N_FEATURES, N_CLASSES = 96, 30, 4, 3


def blobs(n: int, seed: int) -> "tuple[np.ndarray, np.ndarray]":
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, N_CLASSES, size=n).astype(np.int32)
    centers = np.eye(N_CLASSES, N_FEATURES, dtype=np.float32) * 3.0
    features = centers[labels] + rng.normal(scale=0.7, size=(n, N_FEATURES)).astype(np.float32)
    return features, labels


def make_dataset(n: int, seed: int, batch_size: int, shuffle: bool) -> tf.data.Dataset:
    features, labels = blobs(n, seed)
    ds = tf.data.Dataset.from_tensor_slices(({"x": features}, labels))
    if shuffle:
        ds = ds.shuffle(n, seed=seed)
    return ds.batch(batch_size)


def raw_serving_fn() -> tf.estimator.export.ServingInputReceiver:
    x = tf.compat.v1.placeholder(tf.float32, [None, N_FEATURES], name="x")
    return tf.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


class MetadataHook(estimator.RunHook):
    """The seed's example hook, plus a record of the other callbacks."""

    def __init__(self, context: Any, metadata: str) -> None:
        self._context = context
        self._metadata = metadata
        self.loaded: List[str] = []
        self.closed = 0

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "metadata.txt"), "w") as fp:
            fp.write(self._metadata)

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "metadata.txt")) as fp:
            self.loaded.append(fp.read())

    def on_trial_close(self) -> None:
        self.closed += 1


class LabelSum(estimator.MetricReducer):
    """Sum and count of labels: the exact mean label over the whole validation set."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def accumulate(self, metric: Any) -> Any:
        self.total += float(np.sum(metric["labels"]))
        self.count += int(metric["n"])
        return (self.total, self.count)

    def cross_slot_reduce(self, per_slot_metrics: List[Any]) -> Any:
        total = sum(t for t, _ in per_slot_metrics)
        count = sum(c for _, c in per_slot_metrics)
        return total / count


class _Base(estimator.EstimatorTrial):
    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        self.context = context
        self.hook = MetadataHook(context, "my_metadata")

    def _input_fn(self, train: bool) -> Any:
        def input_fn() -> tf.data.Dataset:
            n, seed = (N_TRAIN, 1) if train else (N_VAL, 2)
            ds = make_dataset(n, seed, self.context.get_per_slot_batch_size(), shuffle=train)
            return self.context.wrap_dataset(ds)

        return input_fn

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        return tf.estimator.TrainSpec(self._input_fn(True), max_steps=1, hooks=[self.hook])

    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        return tf.estimator.EvalSpec(self._input_fn(False), steps=None)

    def build_serving_input_receiver_fns(self) -> Dict[str, Any]:
        return {"raw": raw_serving_fn}


class PremadeTrial(_Base):
    def build_estimator(self) -> tf.estimator.Estimator:
        optimizer = self.context.wrap_optimizer(
            tf.keras.optimizers.legacy.Adam(learning_rate=self.context.get_hparam("learning_rate"))
        )
        return tf.estimator.DNNClassifier(
            feature_columns=[tf.feature_column.numeric_column("x", shape=(N_FEATURES,))],
            hidden_units=[8],
            n_classes=N_CLASSES,
            optimizer=optimizer,
        )


class CustomTrial(_Base):
    def build_estimator(self) -> tf.estimator.Estimator:
        context = self.context
        lr = context.get_hparam("learning_rate")

        def model_fn(features: Dict[str, tf.Tensor], labels: tf.Tensor, mode: str) -> tf.estimator.EstimatorSpec:
            hidden = tf.compat.v1.layers.dense(features["x"], 8, activation=tf.nn.relu)
            logits = tf.compat.v1.layers.dense(hidden, N_CLASSES)
            predictions = {"class": tf.argmax(logits, axis=1), "probabilities": tf.nn.softmax(logits)}
            if mode == tf.estimator.ModeKeys.PREDICT:
                return tf.estimator.EstimatorSpec(mode, predictions=predictions)
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
            if mode == tf.estimator.ModeKeys.TRAIN:
                optimizer = context.wrap_optimizer(tf.compat.v1.train.GradientDescentOptimizer(lr))
                train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
                return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
            n = tf.shape(labels)[0]
            metrics = {
                "accuracy": tf.compat.v1.metrics.accuracy(labels, predictions["class"]),
                "mean_label": context.experimental.make_metric(
                    {"labels": labels, "n": n}, LabelSum(), np.float64
                ),
                "batch_sizes": context.experimental.make_metric(
                    n, lambda sizes: float(np.sum(sizes)), np.float64
                ),
            }
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

        return tf.estimator.Estimator(model_fn=model_fn)


class CachedTrial(CustomTrial):
    """Reads its data through the dataset cache of context.experimental."""

    def _input_fn(self, train: bool) -> Any:
        experimental = self.context.experimental

        def input_fn() -> tf.data.Dataset:
            if train:
                @experimental.cache_train_dataset("blobs", "v1", shuffle=True)
                def make() -> tf.data.Dataset:
                    features, labels = blobs(N_TRAIN, 1)
                    return tf.data.Dataset.from_tensor_slices(({"x": features}, labels))
            else:
                @experimental.cache_validation_dataset("blobs", "v1")
                def make() -> tf.data.Dataset:
                    features, labels = blobs(N_VAL, 2)
                    return tf.data.Dataset.from_tensor_slices(({"x": features}, labels))
            return make().batch(self.context.get_per_slot_batch_size())

        return input_fn


class TupleInputTrial(CustomTrial):
    """Its training input_fn returns (features, labels) instead of a tf.data.Dataset."""

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        def input_fn() -> Any:
            features, labels = blobs(N_TRAIN, 1)
            return {"x": tf.constant(features)}, tf.constant(labels)

        return tf.estimator.TrainSpec(input_fn)


def config(**overrides: Any) -> Dict[str, Any]:
    raw: Dict[str, Any] = {
        "hyperparameters": {"global_batch_size": 8, "learning_rate": 0.05},
        "searcher": {"name": "single", "metric": "accuracy", "smaller_is_better": False,
                     "max_length": {"batches": 40}},
        "scheduling_unit": 10,
        "entrypoint": "_trials:CustomTrial",
    }
    raw.update(overrides)
    return dict(det_config.load_experiment_config(raw))
