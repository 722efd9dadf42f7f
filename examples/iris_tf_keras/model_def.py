"""Iris species from four measurements: a small tf.keras MLP as a TFKerasTrial."""
import tensorflow as tf

from determined.keras import TFKerasTrial, TFKerasTrialContext
from data import load_split


def build_iris_model(hidden_units: int) -> tf.keras.Model:
    """The network, uncompiled: both the trial and the Native API script use it."""
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(4,), name="measurements"),
            tf.keras.layers.Dense(hidden_units, activation="relu"),
            tf.keras.layers.Dense(3, activation="softmax"),
        ]
    )


def compile_iris_model(model: tf.keras.Model, learning_rate: float) -> None:
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=learning_rate),
        loss=tf.keras.losses.CategoricalCrossentropy(),
        metrics=[tf.keras.metrics.CategoricalAccuracy()],
    )


class IrisTrial(TFKerasTrial):
    def __init__(self, context: TFKerasTrialContext) -> None:
        self.context = context

    def build_model(self) -> tf.keras.Model:
        model = build_iris_model(self.context.get_hparam("hidden_units"))
        model = self.context.wrap_model(model)
        compile_iris_model(model, self.context.get_hparam("learning_rate"))
        return model

    def build_training_data_loader(self):
        return load_split("train")

    def build_validation_data_loader(self):
        return load_split("validation")
