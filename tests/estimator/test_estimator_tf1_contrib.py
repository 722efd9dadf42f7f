"""TF 1.x's tf.contrib names carried over to TF 2.15 (determined/tensorflow/_tf1_contrib.py): optimize_loss trains a
graph-mode model with each kind of optimizer argument, clips, runs the update ops and counts steps; the regularizers
and initializers compute what TF 1.15's did; any other tf.contrib name is a clear error."""
import math
import pathlib
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np
import pytest
import tensorflow as tf

import _estimator_trials
from determined import estimator  # noqa: F401 -- installs tf.contrib and the TF 1.x names of `tf`
from determined.tensorflow import _tf1_contrib
from determined.tensorflow._tf1_compat import v1_behavior
from test_estimator_trial import run

N, D = 64, 4


@pytest.fixture
def graph() -> Iterator[tf.Graph]:
    with v1_behavior(), tf.Graph().as_default() as g:
        tf.compat.v1.set_random_seed(0)
        yield g


def _regression(use_resource: bool = False) -> Tuple[Any, Any]:
    """A linear regression on fixed data: the loss and the weights variable (RefVariables, as TF 1.x made them,
    unless `use_resource`)."""
    rng = np.random.RandomState(0)
    x = rng.randn(N, D).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32) + 0.25
    zeros = tf.compat.v1.zeros_initializer()
    w = tf.compat.v1.get_variable("w", [D], initializer=zeros, use_resource=use_resource)
    b = tf.compat.v1.get_variable("b", [], initializer=zeros, use_resource=use_resource)
    loss = tf.reduce_mean(tf.square(tf.linalg.matvec(tf.constant(x), w) + b - tf.constant(y)))
    return loss, w


def _train(train_op: Any, steps: int, fetch: Any = None) -> Tuple[List[float], Any]:
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        losses = [float(sess.run(train_op)) for _ in range(steps)]
        return losses, sess.run(fetch) if fetch is not None else None


OPTIMIZERS: Dict[str, Tuple[Any, Any]] = {
    "instance": (None, lambda: tf.compat.v1.train.GradientDescentOptimizer(0.05)),
    "name SGD": (0.05, lambda: "SGD"),
    "name Adam": (0.2, lambda: "Adam"),
    "name Momentum": (0.02, lambda: "Momentum"),
    "name RMSProp": (0.05, lambda: "RMSProp"),
    "name Adagrad": (0.5, lambda: "Adagrad"),
    "name Ftrl": (0.5, lambda: "Ftrl"),
    "class": (0.2, lambda: tf.compat.v1.train.AdamOptimizer),
    "function of the rate": (0.05, lambda: (lambda lr: tf.compat.v1.train.MomentumOptimizer(lr, 0.5))),
    "keras instance": (None, lambda: tf.keras.optimizers.SGD(learning_rate=0.05)),
    "keras class": (0.05, lambda: tf.keras.optimizers.SGD),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_optimize_loss_trains_with_each_kind_of_optimizer(graph: tf.Graph, kind: str) -> None:
    learning_rate, make = OPTIMIZERS[kind]
    loss, _ = _regression(use_resource=kind.startswith("keras"))  # Keras' optimizers train resource variables
    step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.contrib.layers.optimize_loss(loss, step, learning_rate, make())
    losses, final_step = _train(train_op, 30, step)
    assert losses[-1] < 0.5 * losses[0], losses
    assert final_step == 30
    if learning_rate is not None:  # a float rate is kept in a variable of the op's scope
        assert [v.op.name for v in tf.compat.v1.global_variables() if "learning_rate" in v.op.name] == \
            ["OptimizeLoss/learning_rate"]


def test_optimize_loss_returns_the_loss_and_accepts_what_wrap_optimizer_returns(graph: tf.Graph) -> None:
    from determined.estimator._estimator_context import EstimatorContext

    optimizer = tf.compat.v1.train.AdamOptimizer(0.1)
    context = EstimatorContext.__new__(EstimatorContext)
    context.optimizers = []
    assert EstimatorContext.wrap_optimizer(context, optimizer) is optimizer
    loss, _ = _regression()
    train_op = tf.contrib.layers.optimize_loss(
        loss=loss, global_step=tf.train.get_or_create_global_step(), learning_rate=None, optimizer=optimizer)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        before = sess.run(loss)
        assert sess.run(train_op) == pytest.approx(before)  # the loss of the step that was taken
        assert sess.run(loss) < before


def test_optimize_loss_clips_to_the_global_norm_or_with_a_function(graph: tf.Graph) -> None:
    loss, w = _regression()
    step = tf.compat.v1.train.get_or_create_global_step()
    grad_norm = tf.linalg.global_norm(tf.gradients(loss, tf.compat.v1.trainable_variables()))
    train_op = tf.contrib.layers.optimize_loss(loss, step, 1.0, "SGD", clip_gradients=0.01)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        assert sess.run(grad_norm) > 1.0
        sess.run(train_op)
        moved = np.sqrt(np.sum(sess.run(w) ** 2) + sess.run(tf.compat.v1.trainable_variables()[1]) ** 2)
    assert 0.009 < moved <= 0.01 + 1e-6  # lr 1: the step is the clipped gradient


def test_optimize_loss_clip_function_and_multipliers_shape_the_gradients(graph: tf.Graph) -> None:
    loss, w = _regression()
    b = tf.compat.v1.trainable_variables()[1]
    step = tf.compat.v1.train.get_or_create_global_step()
    seen: List[Any] = []

    def keep_w_only(grads_and_vars: List[Tuple[Any, Any]]) -> List[Tuple[Any, Any]]:
        seen.extend(v for _, v in grads_and_vars)
        return [(g if v is w else tf.zeros_like(g), v) for g, v in grads_and_vars]

    train_op = tf.contrib.layers.optimize_loss(loss, step, 0.05, "SGD", clip_gradients=keep_w_only,
                                               gradient_multipliers={"w": 2.0})
    _, (w_value, b_value, step_value) = _train(train_op, 3, [w, b, step])
    assert seen == [w, b]
    assert b_value == 0.0 and np.abs(w_value).sum() > 0 and step_value == 3


def test_optimize_loss_runs_the_update_ops_before_the_step(graph: tf.Graph) -> None:
    loss, _ = _regression()
    counter = tf.compat.v1.get_variable("counter", [], tf.int32, tf.compat.v1.zeros_initializer(), trainable=False)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, tf.compat.v1.assign_add(counter, 1))
    explicit = tf.compat.v1.get_variable("explicit", [], tf.int32, tf.compat.v1.zeros_initializer(), trainable=False)
    step = tf.compat.v1.train.get_or_create_global_step()
    from_collection = tf.contrib.layers.optimize_loss(loss, step, 0.01, "SGD", name="a")
    given = tf.contrib.layers.optimize_loss(loss, None, 0.01, "SGD", name="b",
                                            update_ops=[tf.compat.v1.assign_add(explicit, 10)])
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(3):
            sess.run(from_collection)
        sess.run(given)
        assert sess.run([counter, explicit, step]) == [3, 10, 4]  # None: the graph's global step


def test_optimize_loss_global_step_decay_and_summaries(graph: tf.Graph) -> None:
    loss, _ = _regression()
    step = tf.compat.v1.train.get_or_create_global_step()
    rates: List[Any] = []

    def decay(lr: Any, global_step: Any) -> Any:
        rates.append(global_step)
        return tf.compat.v1.train.exponential_decay(lr, global_step, 1, 0.5)

    train_op = tf.contrib.layers.optimize_loss(
        loss, step, 0.1, "SGD", learning_rate_decay_fn=decay, increment_global_step=False,
        summaries=_tf1_contrib.OPTIMIZER_SUMMARIES, gradient_noise_scale=0.01)
    assert rates == [step]
    names = sorted(s.op.name for s in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))
    for wanted in ("loss", "learning_rate", "global_norm/gradient_norm", "gradients/w", "gradient_norm/b"):
        assert any(name.startswith(f"OptimizeLoss/{wanted}") for name in names), (wanted, names)
    losses, final_step = _train(train_op, 5, step)
    assert final_step == 0 and losses[-1] < losses[0]


def test_optimize_loss_refuses_bad_arguments_clearly(graph: tf.Graph) -> None:
    loss, _ = _regression()
    step = tf.compat.v1.train.get_or_create_global_step()
    optimize_loss = tf.contrib.layers.optimize_loss
    with pytest.raises(ValueError, match="'SGD' is a name, so learning_rate must be given"):
        optimize_loss(loss, step, None, "SGD")
    with pytest.raises(ValueError, match="unknown optimizer name 'Adamax'"):
        optimize_loss(loss, step, 0.1, "Adamax")
    with pytest.raises(ValueError, match="unknown summaries \\['weights'\\]"):
        optimize_loss(loss, step, 0.1, "SGD", summaries=["weights"])
    with pytest.raises(ValueError, match="clip_gradients must be a float"):
        optimize_loss(loss, step, 0.1, "SGD", clip_gradients="1.0")
    with pytest.raises(ValueError, match="loss must be a scalar"):
        optimize_loss(tf.ones([3]), step, 0.1, "SGD")
    with pytest.raises(ValueError, match="Keras optimizer SGD can only train resource variables, and \\['w', 'b'\\]"):
        optimize_loss(loss, step, None, tf.keras.optimizers.SGD(0.1))


def test_regularizers_and_initializers_compute_what_tf1_did(graph: tf.Graph) -> None:
    layers = tf.contrib.layers
    weights = tf.constant([[1.0, -2.0], [3.0, 0.5]])
    penalty = layers.apply_regularization(layers.l1_l2_regularizer(0.1, 0.5), [weights, weights])
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES) == [penalty]
    assert layers.l2_regularizer(0.0)(weights) is None
    with pytest.raises(ValueError, match="scale cannot be an integer"):
        layers.l2_regularizer(1)
    xavier = layers.xavier_initializer(seed=1)([200, 300])
    normal = layers.variance_scaling_initializer(factor=2.0, seed=2)([3, 3, 40, 64])
    with tf.compat.v1.Session() as sess:
        assert sess.run(layers.l1_regularizer(0.1)(weights)) == pytest.approx(0.65)
        assert sess.run(layers.l2_regularizer(0.5)(weights)) == pytest.approx(0.5 * 14.25 / 2)
        assert sess.run(penalty) == pytest.approx(2 * (0.65 + 0.5 * 14.25 / 2))
        xavier_value, normal_value = sess.run([xavier, normal])
    limit = math.sqrt(6.0 / 500)
    assert np.abs(xavier_value).max() <= limit and np.abs(xavier_value).max() > 0.95 * limit
    assert np.std(normal_value) == pytest.approx(math.sqrt(1.3 * 2.0 / (9 * 40)) * 0.88, rel=0.05)
    assert tf.contrib.framework.get_or_create_global_step() is tf.compat.v1.train.get_global_step()


def test_other_contrib_names_are_a_clear_error() -> None:
    with pytest.raises(AttributeError, match="tf.contrib.layers.fully_connected is not available: TF 1.x's "
                                             "tf.contrib is gone in TF 2.15; use tf.compat.v1.layers.dense"):
        tf.contrib.layers.fully_connected
    with pytest.raises(_tf1_contrib.ContribNameError, match="tf.contrib.slim .*tf-slim"):
        tf.contrib.slim
    assert not hasattr(tf.contrib, "rnn") and hasattr(tf.contrib.layers, "optimize_loss")
    with pytest.raises(ModuleNotFoundError, match="tensorflow.contrib.eager is not available: TF 1.x's tf.contrib "
                                                  "is gone in TF 2.15; use eager execution"):
        import tensorflow.contrib.eager  # noqa: F401
    with pytest.raises(ImportError, match="tensorflow.contrib.nccl is not available"):
        from tensorflow.contrib import nccl  # noqa: F401
    from tensorflow.contrib.layers import optimize_loss  # noqa: F401 -- the names carried over import
    import tensorflow.contrib.framework as framework

    assert optimize_loss is tf.contrib.layers.optimize_loss and framework is tf.contrib.framework


class OptimizeLossTrial(_estimator_trials.CustomTrial):
    """A model_fn of TF 1.15 that trains with tf.contrib.layers.optimize_loss and a wrapped optimizer."""

    def build_estimator(self) -> tf.estimator.Estimator:
        context = self.context

        def model_fn(features: Dict[str, tf.Tensor], labels: tf.Tensor, mode: str) -> tf.estimator.EstimatorSpec:
            logits = tf.layers.dense(tf.layers.dense(features["x"], 8, activation=tf.nn.relu),
                                     _estimator_trials.N_CLASSES)
            if mode == tf.estimator.ModeKeys.PREDICT:  # the SavedModel export of the checkpoint
                return tf.estimator.EstimatorSpec(mode, predictions={"probabilities": tf.nn.softmax(logits)})
            loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
            train_op = None
            if mode == tf.estimator.ModeKeys.TRAIN:
                optimizer = context.wrap_optimizer(tf.train.AdamOptimizer(context.get_hparam("learning_rate")))
                train_op = tf.contrib.layers.optimize_loss(
                    loss=loss, global_step=tf.train.get_or_create_global_step(), learning_rate=None,
                    optimizer=optimizer)
            accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, axis=1))
            return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op,
                                              eval_metric_ops={"accuracy": accuracy})

        return tf.estimator.Estimator(model_fn=model_fn)


def test_estimator_trial_trains_with_optimize_loss(tmp_path: pathlib.Path) -> None:
    context = run(OptimizeLossTrial, tmp_path, [20, 40])
    losses = [r["metrics"]["loss"] for r in context.train.training_history]
    assert losses[-1] < losses[0], losses
    assert context.train.validation_history[-1]["metrics"]["accuracy"] > 0.5


def test_tf_layers_batch_norm_updates_run_with_optimize_loss_after_tensorpack_set_keras_layers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from determined.tensorflow import _tf1_compat

    monkeypatch.setattr(tf, "layers", tf.keras.layers)  # what `import tensorpack` does on TF 2 when tf has none
    _tf1_compat.fill_tf1_names()
    assert tf.layers is tf.compat.v1.layers
    with v1_behavior(), tf.Graph().as_default():
        x = tf.constant(np.random.RandomState(0).randn(32, 3).astype(np.float32) + 5.0)
        bn = tf.layers.BatchNormalization(momentum=0.5)
        loss = tf.reduce_mean(tf.square(tf.layers.dense(bn(x, training=True), 1)))
        train_op = tf.contrib.layers.optimize_loss(loss, tf.train.get_or_create_global_step(), 0.01, "SGD")
        _, moving_mean = _train(train_op, 4, bn.moving_mean)
    assert np.all(moving_mean > 4.0), moving_mean  # from 0 towards the batch mean, 5
