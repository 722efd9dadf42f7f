"""TensorFlow V1 behaviour for EstimatorTrial code, as Determined 0.12-0.20 gave it (they ran the whole trial
process with `tf.compat.v1.disable_v2_behavior()`); the shims both frameworks share are in
determined/tensorflow/_tf1_compat.py.

* `v1_behavior()` (shared): for the duration of an Estimator run, graphs are built with V1 variables, control
  flow, tensor shapes and tensor comparison, restored afterwards.
* `UserCodeGraph(seed)`: the trial's own code (`__init__`, `build_estimator`, `build_train_spec`,
  `build_validation_spec`, `build_serving_input_receiver_fns`) runs in a graph, as under TF 1.x, where
  `tf.compat.v1.placeholder`, `tf.compat.v1.Session` and the other graph-mode APIs work. As under TF 1.x, the
  Estimator builds its own graphs: tensors made there are not part of the model.
"""
import contextlib
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
