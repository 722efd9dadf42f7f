"""determined.keras: TFKerasTrial, its contexts, SequenceAdapter and the controller (TensorFlow 2.15, tf.keras)."""
from determined.keras._checkpoint import load_model_from_checkpoint_path
from determined.keras._controller import TFKerasTrialController
from determined.keras._data import SequenceAdapter
from determined.keras._tf_keras_context import (
    TFKerasContext,
    TFKerasExperimentalContext,
    TFKerasNativeContext,
    TFKerasTrialContext,
)
from determined.keras._tf_keras_trial import TFKerasTrial

TFKerasTrial.trial_controller_class = TFKerasTrialController

__all__ = [
    "SequenceAdapter",
    "TFKerasContext",
    "TFKerasExperimentalContext",
    "TFKerasNativeContext",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "TFKerasTrialController",
    "load_model_from_checkpoint_path",
]
