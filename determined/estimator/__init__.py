"""determined.estimator: EstimatorTrial, its contexts, MetricReducer, RunHook and the controller.

Importing it installs the TensorFlow 1.x idioms of determined.tensorflow._tf1_compat (docs/estimator.md), with
the TF 1.x names of the `tf` namespace that the graph code of Estimator trials of TF 1.x used
(`tf.train.exponential_decay`, `tf.train.AdamOptimizer`, `tf.placeholder`, ...), and TF 1.x's BoostedTrees
Estimators (`tf.estimator.BoostedTreesClassifier`, ..., determined/estimator/_tf1_compat.py).
"""
from determined.tensorflow import _tf1_compat as _tf_compat

_tf_compat.install()
_tf_compat.fill_tf1_names()

from determined.estimator._tf1_compat import install_boosted_trees  # noqa: E402

install_boosted_trees()

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
