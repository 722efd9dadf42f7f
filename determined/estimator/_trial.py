"""EstimatorTrial: the class users subclass to train a tf.estimator.Estimator."""
import abc
from typing import Dict

import tensorflow as tf

from determined._trial import Trial
from determined.estimator._estimator_context import EstimatorTrialContext, ServingInputReceiverFn


class EstimatorTrial(Trial):
    """tf.estimator trials are created by subclassing this abstract class.

    EstimatorTrial supports TF 2.x; however it uses TensorFlow V1 behavior: the trial's methods run in a
    graph, as under TF 1.x (``tf.compat.v1.placeholder`` works there), and the Estimator's graphs are built
    with V1 variables, control flow and shapes, so there is no need to disable V2 behavior yourself.
    """

    trial_context_class = EstimatorTrialContext

    def __init__(self, context: EstimatorTrialContext) -> None:
        """Initializes a trial using the provided trial_context.

        Override this function to initialize any shared state between the estimator, train spec, and/or
        validation spec.
        """
        self.context = context

    @abc.abstractmethod
    def build_estimator(self) -> tf.estimator.Estimator:
        """Specifies the tf.estimator.Estimator instance to be used during training and validation: a
        premade Estimator provided by the TensorFlow team, or a custom Estimator created by the user."""

    @abc.abstractmethod
    def build_train_spec(self) -> tf.estimator.TrainSpec:
        """Specifies the tf.estimator.TrainSpec to be used for training steps.

        Its input_fn must return a tf.data.Dataset (of batches); an input_fn returning a tuple of features
        and labels is not supported. The ``max_steps`` of the spec is ignored: the experiment's searcher
        decides how many batches to train.
        """

    @abc.abstractmethod
    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        """Specifies the tf.estimator.EvalSpec to be used for validation steps: its input_fn (returning a
        tf.data.Dataset) is evaluated for ``steps`` batches, or until the input ends if ``steps`` is None."""

    def build_serving_input_receiver_fns(self) -> Dict[str, ServingInputReceiverFn]:
        """Optionally returns a dict mapping names to serving_input_receiver_fns.

        Each function is used to export a SavedModel inference graph into every checkpoint, with
        Estimator.export_saved_model, in a subdirectory named by its key. For example returning
        ``{"raw": tf.estimator.export.build_raw_serving_input_receiver_fn(...)}`` puts a SavedModel under
        ``raw/`` in each checkpoint. By default no SavedModel is exported and the checkpoint holds only the
        training graph's checkpoint files.
        """
        return {}
