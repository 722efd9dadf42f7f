"""TensorFlow V1 behaviour for EstimatorTrial code, as Determined 0.12-0.20 gave it (they ran the whole trial
process with `tf.compat.v1.disable_v2_behavior()`); the shims both frameworks share are in
determined/tensorflow/_tf1_compat.py.

* `v1_behavior()`: for the duration of an Estimator run, graphs are built with V1 variables, control flow,
  tensor shapes and tensor comparison, and restored afterwards. Eager execution stays available outside of
  graphs (the dataset cache and SavedModel loading need it).
* `user_code_graph(seed)`: the trial's own code (`__init__`, `build_estimator`, `build_train_spec`,
  `build_validation_spec`, `build_serving_input_receiver_fns`) runs in a graph, as under TF 1.x, where
  `tf.compat.v1.placeholder`, `tf.compat.v1.Session` and the other graph-mode APIs work. As under TF 1.x, the
  Estimator builds its own graphs: tensors made there are not part of the model.
"""
import contextlib
from typing import Iterator

import tensorflow as tf
from tensorflow.python import tf2
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.framework import tensor_shape


@contextlib.contextmanager
def v1_behavior() -> Iterator[None]:
    was_tf2 = tf2.enabled()
    was_shape_v2 = tensor_shape._TENSORSHAPE_V2_OVERRIDE
    was_resource = tf.compat.v1.resource_variables_enabled()
    was_cf_v2 = tf.compat.v1.control_flow_v2_enabled()
    was_equality = tensor_lib.Tensor._USE_EQUALITY
    tf2.disable()
    tf.compat.v1.disable_v2_tensorshape()
    tf.compat.v1.disable_resource_variables()
    tf.compat.v1.disable_control_flow_v2()
    tf.compat.v1.disable_tensor_equality()
    try:
        yield
    finally:
        if was_tf2:
            tf2.enable()
        tensor_shape._TENSORSHAPE_V2_OVERRIDE = was_shape_v2
        if was_resource:
            tf.compat.v1.enable_resource_variables()
        if was_cf_v2:
            tf.compat.v1.enable_control_flow_v2()
        tensor_lib.Tensor._USE_EQUALITY = was_equality


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
