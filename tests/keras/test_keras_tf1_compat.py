"""Code written for the TensorFlow of Determined 0.12/0.13 (TF 1.15) and its names, on TF 2.15: TF 1.x optimizer
arguments, `acc`/`val_acc`, `tensorflow.python.keras.*` imports, `_ArrayLikeAdapter`, `InputData`, the TensorBoard
callback. (Eager execution off, in a process of its own: test_keras_trial_api.py.)"""
import pathlib
import typing
from typing import Any, List

import numpy as np
import pytest
import tensorflow as tf

from determined import errors, keras, tensorboard
from tests.keras import _keras_trials as trials


class TF1OptimizerTrial(trials.ArrayTrial):
    """Compiled as TF 1.x code was: `lr=` and `decay=`, and the metric "accuracy" (which TF 1.x named `acc`)."""

    def build_model(self) -> tf.keras.Model:
        model = self.context.wrap_model(tf.keras.Sequential([
            tf.keras.layers.Dense(8, activation="tanh", input_shape=(trials.FEATURES,)),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ]))
        optimizer = self.context.wrap_optimizer(tf.keras.optimizers.RMSprop(lr=0.05, decay=1e-4))
        model.compile(optimizer=optimizer, loss="binary_crossentropy", metrics=["accuracy"])
        return model


def test_tf1_optimizer_arguments_and_metric_names(tmp_path: pathlib.Path) -> None:
    sgd = tf.keras.optimizers.SGD(lr=0.25, decay=1e-6, momentum=0.5)
    assert isinstance(sgd, tf.keras.optimizers.legacy.SGD)
    assert float(sgd.learning_rate) == 0.25 and float(sgd.decay) == pytest.approx(1e-6)
    assert float(tf.keras.optimizers.Adam(lr=0.3).learning_rate) == pytest.approx(0.3)  # not Keras 2.15's 0.001
    assert type(tf.keras.optimizers.Adam(0.01)) is tf.keras.optimizers.Adam  # TF 2 code keeps Keras 2.15's

    config = trials.make_config(searcher={"name": "single", "metric": "val_acc", "smaller_is_better": False,
                                          "max_length": {"batches": 40}})
    ctx = trials.run_trial(TF1OptimizerTrial, tmp_path, [40], config)
    history = ctx.train.training_history
    assert history[-1]["metrics"]["loss"] < history[0]["metrics"]["loss"] * 0.8, history
    assert history[0]["metrics"]["acc"] == history[0]["metrics"]["accuracy"]
    [validation] = ctx.train.validation_history
    metrics = validation["metrics"]
    assert metrics["val_acc"] == metrics["val_accuracy"] > 0.7
    assert ctx.searcher.completed_operations == [{"length": 40, "metric": metrics["val_acc"]}]

    context = type("C", (keras.TFKerasContext,), {})()
    context._init_wrappers()
    with pytest.raises(errors.InvalidTrialError, match="wrap_optimizer\\(\\) takes a tf.keras optimizer"):
        context.wrap_optimizer("adam")


def test_keras_metric_names_of_tf1() -> None:
    from determined.tensorflow import _tf1_compat

    assert _tf1_compat.tf2_metric_name("val_acc") == "val_accuracy"
    assert _tf1_compat.tf2_metric_name("dense_1_acc") == "dense_1_accuracy"
    assert _tf1_compat.tf2_metric_name("ce") == "crossentropy"
    assert _tf1_compat.tf2_metric_name("val_loss") is None and _tf1_compat.tf2_metric_name("tacc") is None
    metrics = {"val_accuracy": 0.5, "val_loss": 1.0}
    assert _tf1_compat.tf1_metric_aliases(metrics, ["val_acc", "val_loss", None]) == {**metrics, "val_acc": 0.5}


class LegacyImportsTrial(trials.ArrayTrial):
    """A TF 1.x-era trial: its model, optimizer and Sequence from tensorflow.python.keras; validation arrays through
    0.12's _ArrayLikeAdapter."""

    def build_model(self) -> tf.keras.Model:
        from tensorflow.python.keras import layers, models
        from tensorflow.python.keras.optimizer_v2 import gradient_descent

        model = self.context.wrap_model(models.Sequential([
            layers.Dense(8, activation="tanh", input_shape=(trials.FEATURES,)),
            layers.Dense(1, activation="sigmoid"),
        ]))
        model.compile(optimizer=gradient_descent.SGD(0.5), loss="binary_crossentropy", metrics=["accuracy"])
        return model

    def build_training_data_loader(self) -> keras.InputData:
        from tensorflow.python.keras.utils.data_utils import Sequence

        x, y = trials.make_data(0)

        class Batches(Sequence):
            def __len__(self) -> int:
                return len(x) // 8

            def __getitem__(self, index: int) -> Any:
                return x[index * 8:(index + 1) * 8], y[index * 8:(index + 1) * 8]

        return Batches()

    def build_validation_data_loader(self) -> keras.InputData:
        return keras._ArrayLikeAdapter(*trials.make_data(1, 30), batch_size=8)


def test_tensorflow_python_keras_imports_are_tf_keras(tmp_path: pathlib.Path) -> None:
    from tensorflow.python.keras import backend, layers, models
    from tensorflow.python.keras.datasets.cifar import load_batch
    from tensorflow.python.keras.optimizer_v2 import adam
    from tensorflow.python.keras.utils.data_utils import Sequence

    assert Sequence is tf.keras.utils.Sequence
    assert layers.Dense is tf.keras.layers.Dense and models.Model is tf.keras.Model
    assert adam.Adam is tf.keras.optimizers.legacy.Adam and backend.floatx() == "float32"
    assert load_batch.__module__ == "keras.src.datasets.cifar"  # TF 2.15 has no tensorflow.python.keras.datasets
    import tensorflow.python.keras.layers.core as core_layers  # below a replaced module: tf.keras's, not a copy

    assert core_layers.Dense is tf.keras.layers.Dense

    ctx = trials.run_trial(LegacyImportsTrial, tmp_path, [24])
    history = ctx.train.training_history
    assert history[-1]["metrics"]["loss"] < history[0]["metrics"]["loss"], history
    assert ctx.train.validation_history[-1]["metrics"]["val_accuracy"] > 0.6


def test_array_like_adapter_and_input_data() -> None:
    x, y = trials.make_data(0, 20)
    adapter = keras._ArrayLikeAdapter({"a": x[:, :2], "b": x[:, 2:]}, y, batch_size=8)
    assert isinstance(adapter, tf.keras.utils.Sequence) and len(adapter) == 3
    inputs, targets = adapter[2]  # in order, the last batch smaller
    np.testing.assert_array_equal(inputs["b"], x[16:, 2:])
    np.testing.assert_array_equal(targets, y[16:])
    weighted = keras._ArrayLikeAdapter(x, y, 8, sample_weights=np.ones(20), drop_leftovers=True)
    assert len(weighted) == 2 and len(weighted[1]) == 3
    with pytest.raises(errors.InvalidTrialError, match="leaves no batch"):
        keras._ArrayLikeAdapter(x, y, 32, drop_leftovers=True)
    assert keras.SequenceAdapter in typing.get_args(keras.InputData) and tuple in typing.get_args(keras.InputData)
    assert np.ndarray in typing.get_args(keras.ArrayLike)


class TensorBoardTrial(trials.ArrayTrial):
    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        return [keras.TFKerasTensorBoard(update_freq="batch", profile_batch=0, histogram_freq=1)]


def test_tensorboard_callback_writes_into_the_trials_directory(tmp_path: pathlib.Path) -> None:
    assert issubclass(keras.TFKerasTensorBoard, keras.callbacks.TensorBoard)
    ctx = trials.run_trial(TensorBoardTrial, tmp_path, [16], trials.make_config(min_validation_period={"batches": 8}))
    directory = ctx.train.get_tensorboard_path()  # the trial's TensorBoard directory (a local one without a master)
    for run in ("train", "validation"):
        assert any(p.name.startswith("events.out.tfevents.") for p in (directory / run).iterdir()), run
    callback = keras.callbacks.TensorBoard("/somewhere/else")
    assert callback.log_dir == str(tensorboard.get_base_path())


class AutoEncoder(tf.keras.Model):
    """A subclassed model with its own train_step and test_step on inputs alone (as 0.20's GAN example)."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = tf.keras.layers.Dense(2, activation="tanh")
        self.decode = tf.keras.layers.Dense(trials.FEATURES)

    def call(self, x: Any) -> Any:
        return self.decode(self.encode(x))

    def train_step(self, data: Any) -> Any:
        x = data[0] if isinstance(data, tuple) else data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - x))
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
        return {"reconstruction": loss}

    def test_step(self, data: Any) -> Any:
        x = data[0] if isinstance(data, tuple) else data
        return {"reconstruction": tf.reduce_mean(tf.square(self(x) - x))}


class InputsOnlyTrial(trials.ArrayTrial):
    def build_model(self) -> tf.keras.Model:
        model = self.context.wrap_model(AutoEncoder())
        model.compile(optimizer=self.context.wrap_optimizer(tf.keras.optimizers.Adam(0.05)))
        return model

    def _inputs(self, seed: int, n: int) -> tf.data.Dataset:
        x, _ = trials.make_data(seed, n)
        scaled = (x * np.array([1.0, 2.0, 0.5, 1.0])).astype("float32")
        return self.context.wrap_dataset(tf.data.Dataset.from_tensor_slices(scaled)).batch(8)

    def build_training_data_loader(self) -> keras.InputData:
        return self._inputs(0, trials.RECORDS)

    def build_validation_data_loader(self) -> keras.InputData:
        return self._inputs(1, 32)


def test_batches_of_inputs_alone_train_a_custom_train_step(tmp_path: pathlib.Path) -> None:
    config = trials.make_config(searcher={"name": "single", "metric": "val_reconstruction",
                                          "max_length": {"batches": 30}})
    ctx = trials.run_trial(InputsOnlyTrial, tmp_path, [30], config)
    history = ctx.train.training_history
    assert history[-1]["metrics"]["reconstruction"] < history[0]["metrics"]["reconstruction"] * 0.8, history
    assert ctx.train.validation_history[-1]["metrics"]["val_reconstruction"] < history[0]["metrics"]["reconstruction"]
