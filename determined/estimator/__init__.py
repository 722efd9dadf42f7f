"""determined.estimator: EstimatorTrial, its contexts, MetricReducer, RunHook and the controller."""
from determined.estimator._checkpoint import load_estimator_from_checkpoint_path
from determined.estimator._controller import EstimatorTrialController
from determined.estimator._estimator_context import (
    EstimatorContext,
    EstimatorExperimentalContext,
    EstimatorNativeContext,
    EstimatorTrialContext,
)
from determined.estimator._metrics import MetricReducer
from determined.estimator._run_hook import RunHook
from determined.estimator._trial import EstimatorTrial

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
    "load_estimator_from_checkpoint_path",
]
