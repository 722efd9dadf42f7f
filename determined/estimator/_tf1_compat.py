"""TensorFlow V1 behaviour for EstimatorTrial code, as Determined 0.12-0.20 gave it (they ran the whole trial
process with `tf.compat.v1.disable_v2_behavior()`); the shims both frameworks share are in
determined/tensorflow/_tf1_compat.py.

* `v1_behavior()` (shared): for the duration of an Estimator run, graphs are built with V1 variables, control
  flow, tensor shapes and tensor comparison, restored afterwards.
* `UserCodeGraph(seed)`: the trial's own code (`__init__`, `build_estimator`, `build_train_spec`,
  `build_validation_spec`, `build_serving_input_receiver_fns`) runs in a graph, as under TF 1.x, where
  `tf.compat.v1.placeholder`, `tf.compat.v1.Session` and the other graph-mode APIs work. As under TF 1.x, the
  Estimator builds its own graphs: tensors made there are not part of the model.
* `install_boosted_trees()`: `tf.estimator.BoostedTreesClassifier` and `tf.estimator.BoostedTreesRegressor` (and
  their `tf.compat.v1.estimator` names), which TF 2.15's tensorflow_estimator no longer has, are the Estimators of
  determined/estimator/_boosted_trees.py. Importing determined.estimator installs them.
"""
import contextlib
import importlib
from typing import Iterator

import tensorflow as tf

from determined.tensorflow._tf1_compat import v1_behavior


class UserCodeGraph:
    """The graph the trial's own code runs in (one per trial, seeded with the trial seed); enter it with
    `with graph.entered():` around each call of the trial's code."""

    def __init__(self, seed: int) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.compat.v1.set_random_seed(seed)

    @contextlib.contextmanager
    def entered(self) -> Iterator[tf.Graph]:
        with v1_behavior(), self.graph.as_default():
            yield self.graph


# The modules behind `tf.estimator` and `tf.compat.v1.estimator` (tf.compat.v2.estimator is the first), and those
# that `from tensorflow.estimator import ...` and `import tensorflow_estimator` give.
_ESTIMATOR_API_MODULES = (
    "tensorflow_estimator.python.estimator.api._v2.estimator",
    "tensorflow_estimator.python.estimator.api._v1.estimator",
    "tensorflow.estimator",
    "tensorflow_estimator._api.v1.estimator",
    "tensorflow_estimator.estimator",
)


def install_boosted_trees() -> None:
    """Give the estimator namespaces of TF 2.15 the BoostedTrees Estimators of TF 1.x that they lack (a name
    that a namespace has keeps its meaning). Idempotent."""
    from determined.estimator._boosted_trees import BoostedTreesClassifier, BoostedTreesRegressor

    for name in _ESTIMATOR_API_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another layout of tensorflow_estimator: nothing to give it
            continue
        for cls in (BoostedTreesClassifier, BoostedTreesRegressor):
            if not hasattr(module, cls.__name__):
                setattr(module, cls.__name__, cls)
