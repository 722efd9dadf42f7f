"""A TFKerasTrial's build_model(), checked to return a wrapped and compiled tf.keras.Model."""
from typing import Any

import tensorflow as tf

from determined import errors
from determined.keras._tf_keras_context import TFKerasTrialContext


def build_checked_model(trial: Any, context: TFKerasTrialContext, trial_name: str) -> tf.keras.Model:
    """The trial's build_model(), checked to be a wrapped and compiled tf.keras.Model."""
    model = trial.build_model()
    if not isinstance(model, tf.keras.Model):
        raise errors.InvalidTrialError(
            f"{trial_name}.build_model() must return a tf.keras.Model, got {type(model).__name__}"
        )
    if not context._is_wrapped(model):
        raise errors.InvalidTrialError(
            f"{trial_name}.build_model() returned a model that was not wrapped: create it, then "
            "`model = self.context.wrap_model(model)`, then `model.compile(...)`, and return that model"
        )
    if not getattr(model, "_is_compiled", False) or getattr(model, "optimizer", None) is None:
        raise errors.InvalidTrialError(
            f"{trial_name}.build_model() returned a model that is not compiled: call "
            "model.compile(optimizer=..., loss=..., metrics=[...]) on the wrapped model before returning it"
        )
    return model
