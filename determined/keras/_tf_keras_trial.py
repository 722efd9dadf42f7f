"""TFKerasTrial: the class users subclass to train a tf.keras model."""
import abc
from typing import Any, List

import tensorflow as tf

from determined._trial import Trial
from determined.keras._data import InputData
from determined.keras._tf_keras_context import TFKerasTrialContext


class TFKerasTrial(Trial):
    """tf.keras trials are created by subclassing the abstract class TFKerasTrial.

    Users must define all the abstract methods to create the deep learning model associated with a
    specific trial, and to subsequently train and evaluate it.

    Trials run with TensorFlow 2 and execute eagerly by default. To turn eager execution off, call
    ``tf.compat.v1.disable_eager_execution()`` at the top of your ``__init__``.
    """

    trial_context_class = TFKerasTrialContext

    def __init__(self, trial_context: TFKerasTrialContext) -> None:
        """Initializes a trial using the provided trial_context.

        Override this function to initialize any shared state between the model and the data loaders.
        """
        self.context = trial_context

    @abc.abstractmethod
    def build_model(self) -> tf.keras.Model:
        """Defines the deep learning architecture associated with a trial, which may depend on the trial's
        specific hyperparameter settings that are stored in the ``hparams`` dictionary. This function returns
        a ``tf.keras.Model`` object. Users must wrap the model with ``self.context.wrap_model()`` and compile it
        by calling ``model.compile()`` on the wrapped model before it is returned.
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> InputData:
        """Defines the data loader to use during training.

        Should return one of the following:

        1) A tuple (x_train, y_train) of Numpy arrays. x_train must be a Numpy array (or array-like), a list
           of arrays (in case the model has multiple inputs), or a dict mapping input names to the
           corresponding array, if the model has named inputs. y_train should be a numpy array.
        2) A tuple (x_train, y_train, sample_weights) of Numpy arrays.
        3) A tf.data.Dataset returning a tuple of either (inputs, targets) or (inputs, targets, sample_weights).
        4) A keras.utils.Sequence returning a tuple of either (inputs, targets) or (inputs, targets,
           sample weights).
        5) A det.keras.SequenceAdapter returning a tuple of either (inputs, targets) or (inputs, targets,
           sample weights).

        Arrays are batched with the per-slot batch size and shuffled each epoch with the trial seed.
        A ``tf.data.Dataset`` is not restored at its batch on resume: training starts again from the
        beginning of the dataset.
        """

    @abc.abstractmethod
    def build_validation_data_loader(self) -> InputData:
        """Defines the data loader to use during validation: one of the same five kinds as
        build_training_data_loader(). Validation reads it to its end."""

    def session_config(self) -> Any:
        """Specifies the tf.ConfigProto to be used by the TensorFlow session when eager execution is
        disabled. By default, ``tf.ConfigProto(allow_soft_placement=True)`` is used."""
        return tf.compat.v1.ConfigProto(allow_soft_placement=True)

    def keras_callbacks(self) -> List[tf.keras.callbacks.Callback]:
        """Specifies a list of tf.keras.callback.Callback objects to be used during the trial's lifetime.

        Callbacks should avoid calling model.predict(); setting ``model.stop_training`` asks the platform to
        stop the trial early (like ``context.set_stop_requested(True)``).
        """
        return []
