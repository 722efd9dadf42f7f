"""TensorFlow V1 behaviour for the duration of an Estimator run, restored afterwards.

Eager execution stays available (the Estimator builds its graphs in graph mode anyway, and the dataset
cache and SavedModel loading need eager), but the graphs are built with V1 variables, control flow,
tensor shapes and tensor comparison, as EstimatorTrial documents.
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
