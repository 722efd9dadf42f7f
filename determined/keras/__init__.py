"""determined.keras: Determined 0.38's DeterminedCallback and TensorBoard for a `model.fit()` script; TFKerasTrial,
its contexts, SequenceAdapter and the controller (TensorFlow 2.15, tf.keras).

Importing it installs the TensorFlow 1.x idioms of determined.tensorflow._tf1_compat (docs/keras.md).
"""
from determined.tensorflow import _tf1_compat

_tf1_compat.install()

from determined.keras import callbacks  # noqa: E402
from determined.keras._callback import DeterminedCallback, TensorBoard  # noqa: E402
from determined.keras._checkpoint import load_model_from_checkpoint_path  # noqa: E402
from determined.keras._controller import TFKerasTrialController  # noqa: E402
from determined.keras._data import ArrayLike, InputData, SequenceAdapter, _ArrayLikeAdapter  # noqa: E402
from determined.keras._tf_keras_context import (  # noqa: E402
    TFKerasContext,
    TFKerasExperimentalContext,
    TFKerasNativeContext,
    TFKerasTrialContext,
)
from determined.keras._tf_keras_trial import TFKerasTrial  # noqa: E402
from determined.keras.callbacks import TFKerasTensorBoard  # noqa: E402

TFKerasTrial.trial_controller_class = TFKerasTrialController

__all__ = [
    "ArrayLike",
    "DeterminedCallback",
    "InputData",
    "SequenceAdapter",
    "TFKerasContext",
    "TFKerasExperimentalContext",
    "TFKerasNativeContext",
    "TFKerasTensorBoard",
    "TFKerasTrial",
    "TFKerasTrialContext",
    "TFKerasTrialController",
    "TensorBoard",
    "callbacks",
    "load_model_from_checkpoint_path",
]
