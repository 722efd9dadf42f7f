"""determined.estimator: EstimatorTrial, its contexts, MetricReducer, RunHook and the controller.

Importing it installs the TensorFlow 1.x idioms of determined.tensorflow._tf1_compat (docs/estimator.md).
"""
from determined.tensorflow import _tf1_compat

_tf1_compat.install()

from determined.estimator._checkpoint import load_estimator_from_checkpoint_path  # noqa: E402
from determined.estimator._controller import EstimatorTrialController  # noqa: E402
from determined.estimator._estimator_context import (  # noqa: E402
    EstimatorContext,
    EstimatorExperimentalContext,
    EstimatorNativeContext,
    EstimatorTrialContext,
    ServingInputReceiverFn,
)
from determined.estimator._metrics import MetricReducer  # noqa: E402
from determined.estimator._run_hook import RunHook  # noqa: E402
from determined.estimator._trial import EstimatorTrial  # noqa: E402

EstimatorTrial.trial_controller_class = EstimatorTrialController

__all__ = [
    "EstimatorTrial",
    "EstimatorContext",
    "EstimatorTrialContext",
    "EstimatorNativeContext",
    "EstimatorExperimentalContext",
    "EstimatorTrialController",
    "MetricReducer",
    "RunHook",
    "ServingInputReceiverFn",
    "load_estimator_from_checkpoint_path",
]
