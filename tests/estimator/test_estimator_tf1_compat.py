"""EstimatorTrial code of Determined 0.12-0.20 on TF 2.15: the trial's methods run with TF 1.x's graph-mode
behaviour, wrap_optimizer(None), the 0.12/0.13 names, and the Native API's context.train_and_evaluate."""
import os
import pathlib
import typing
from typing import Any, Dict

import numpy as np
import pytest
import tensorflow as tf

import _estimator_trials
from _estimator_trials import N_FEATURES
from determined import errors, estimator
from determined.experimental import Checkpoint
from test_estimator_trial import run


class TF1Trial(_estimator_trials.CustomTrial):
    """Written for TF 1.x: placeholders in __init__ and in build_serving_input_receiver_fns, a Session, no optimizer
    passed to wrap_optimizer (as BoostedTrees trials did), a dataset it shards itself."""

    def __init__(self, context: estimator.EstimatorTrialContext) -> None:
        super().__init__(context)
        assert not tf.executing_eagerly()
        scale = tf.compat.v1.placeholder(tf.float32, [], name="scale")
        with tf.compat.v1.Session() as session:
            self.two = session.run(scale * 2.0, feed_dict={scale: 1.0})
        assert context.wrap_optimizer(None) is None

    def _input_fn(self, train: bool) -> Any:
        def input_fn() -> tf.data.Dataset:
            n, seed = (_estimator_trials.N_TRAIN, 1) if train else (_estimator_trials.N_VAL, 2)
            features, labels = _estimator_trials.blobs(n, seed)
            ds = self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices(({"x": features}, labels)),
                                           shard_dataset=False)
            return ds.batch(self.context.get_per_slot_batch_size())

        return input_fn

    def build_serving_input_receiver_fns(self) -> Dict[str, estimator.ServingInputReceiverFn]:
        x = tf.compat.v1.placeholder(tf.float32, [None, N_FEATURES], name="x")
        return {"raw": tf.estimator.export.build_raw_serving_input_receiver_fn({"x": x})}


def test_trial_code_runs_with_tf1_graph_behaviour_and_its_placeholder_serving_fn_exports(
    tmp_path: pathlib.Path,
) -> None:
    assert tf.executing_eagerly()
    context = run(TF1Trial, tmp_path, [12])
    assert tf.executing_eagerly(), "eager execution is back after the trial"
    ckpt = tmp_path / context.checkpoint.reported[-1]["uuid"]
    assert (ckpt / "raw" / "saved_model.pb").is_file()
    model = Checkpoint.load_from_path(str(ckpt), tags=["serve"])
    features, _ = _estimator_trials.blobs(5, 3)
    outputs = model.signatures["serving_default"](x=tf.constant(features))
    assert outputs["probabilities"].shape == (5, _estimator_trials.N_CLASSES)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert context.train.validation_history[-1]["metrics"]["batch_sizes"] == _estimator_trials.N_VAL
    assert set(typing.get_args(estimator.ServingInputReceiverFn)[1].__args__) == {
        tf.estimator.export.ServingInputReceiver, tf.estimator.export.TensorServingInputReceiver}


def test_native_context_train_and_evaluate_in_its_context_dir(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.experimental import estimator as det_estimator

    monkeypatch.chdir(tmp_path)
    config = {"hyperparameters": {"global_batch_size": 8, "learning_rate": 0.05},
              "searcher": {"name": "single", "metric": "accuracy", "max_length": {"batches": 10}}}
    with pytest.raises(errors.DeterminedError, match="context_dir .*missing.* is not a directory"):
        det_estimator.init(config, mode=det_estimator.Mode.LOCAL, context_dir=str(tmp_path / "missing"))
    code = tmp_path / "code"
    code.mkdir()
    original = tf.estimator.train_and_evaluate
    context = det_estimator.init(config, mode=det_estimator.Mode.LOCAL, context_dir=str(code))
    assert isinstance(context, estimator.EstimatorNativeContext)
    assert pathlib.Path(os.getcwd()) == code, "the script's code runs in its context_dir"

    trial = _estimator_trials.CustomTrial(context)  # its build methods, as a Native API script's functions
    metrics, exports = context.train_and_evaluate(
        trial.build_estimator(), trial.build_train_spec(), trial.build_validation_spec()
    )
    assert exports == [] and metrics["batch_sizes"] == _estimator_trials.N_VAL and "accuracy" in metrics
    assert tf.estimator.train_and_evaluate is original
    with pytest.raises(errors.DeterminedError, match="init\\(\\) returns"):
        estimator.EstimatorNativeContext(context.core, context.get_experiment_config(), {}, 0).train_and_evaluate(
            None, None, None)


class TF1NamesTrial(_estimator_trials.CustomTrial):
    """A model_fn of TF 1.15 that takes TF 1.x names from `tf` itself (tf.train.exponential_decay, ...)."""

    def build_estimator(self) -> tf.estimator.Estimator:
        context = self.context
        lr = context.get_hparam("learning_rate")

        def model_fn(features: Dict[str, tf.Tensor], labels: tf.Tensor, mode: str) -> tf.estimator.EstimatorSpec:
            logits = tf.layers.dense(tf.layers.dense(features["x"], 8, activation=tf.nn.relu),
                                     _estimator_trials.N_CLASSES)
            if mode == tf.estimator.ModeKeys.PREDICT:
                return tf.estimator.EstimatorSpec(mode, predictions={"probabilities": tf.nn.softmax(logits)})
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)  # tf.losses: Keras's in TF 2
            if mode == tf.estimator.ModeKeys.TRAIN:
                decayed = tf.train.exponential_decay(lr, tf.train.get_or_create_global_step(), 100, 0.9)
                optimizer = context.wrap_optimizer(tf.train.GradientDescentOptimizer(decayed))
                train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
                return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
            accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, axis=1))  # tf.metrics: Keras's
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})

        return tf.estimator.Estimator(model_fn=model_fn)


def test_model_fn_with_tf1_names_of_the_tf_namespace_trains(tmp_path: pathlib.Path) -> None:
    context = run(TF1NamesTrial, tmp_path, [20, 40])
    losses = [r["metrics"]["loss"] for r in context.train.training_history]
    assert losses[-1] < losses[0], losses
    assert tf.train.Optimizer is tf.compat.v1.train.Optimizer  # TF 1.x names, filled where TF 2 has none
    assert tf.train.Checkpoint is not tf.compat.v1.train.Checkpoint  # a name both have keeps TF 2's meaning
