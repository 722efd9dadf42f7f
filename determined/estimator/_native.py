"""The Native API's interception of tf.estimator.train_and_evaluate: the script's Estimator and specs are
trained by an EstimatorTrialController instead."""
from typing import Any, Callable, Dict, Type

import tensorflow as tf

from determined.estimator._controller import EstimatorTrialController, check_parts
from determined.estimator._estimator_context import EstimatorNativeContext
from determined.estimator._trial import EstimatorTrial

_ORIGINAL = tf.estimator.train_and_evaluate


def native_trial_class(
    estimator: Any, train_spec: Any, eval_spec: Any, serving_fns: Dict[str, Callable[..., Any]]
) -> Type[EstimatorTrial]:
    """An EstimatorTrial whose build methods return what a Native API script passed to train_and_evaluate."""
    parts = check_parts("train_and_evaluate()", estimator, train_spec, eval_spec, serving_fns)

    class EstimatorNativeTrial(EstimatorTrial):
        trial_context_class = EstimatorNativeContext

        def build_estimator(self) -> Any:
            return parts.estimator

        def build_train_spec(self) -> Any:
            return parts.train_spec

        def build_validation_spec(self) -> Any:
            return parts.eval_spec

        def build_serving_input_receiver_fns(self) -> Dict[str, Callable[..., Any]]:
            return parts.serving_fns

    return EstimatorNativeTrial


def run_native(context: EstimatorNativeContext, estimator: Any, train_spec: Any, eval_spec: Any) -> None:
    """Train the script's Estimator through the searcher operations of the context's core context."""
    trial_class = native_trial_class(estimator, train_spec, eval_spec, context.serving_input_receiver_fns)
    EstimatorTrialController(trial_class, context).run()


def intercept_train_and_evaluate(context: EstimatorNativeContext, replacement: Callable[..., Any]) -> None:
    """Make `context.train_and_evaluate` and tf.estimator.train_and_evaluate (and its tf.compat.v1 alias) call
    `replacement`."""
    context._train_and_evaluate = replacement
    for namespace in (tf.estimator, tf.compat.v1.estimator):
        setattr(namespace, "train_and_evaluate", replacement)


def restore_train_and_evaluate() -> None:
    for namespace in (tf.estimator, tf.compat.v1.estimator):
        setattr(namespace, "train_and_evaluate", _ORIGINAL)
