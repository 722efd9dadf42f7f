"""The Native API (create, create_trial_instance) and the client SDK (Determined and the objects it returns).

The names are imported on first use (`from determined.experimental import Determined` works as before), so the
CLI's helpers in this package do not pull in the whole SDK; `det.experimental.keras` and
`det.experimental.estimator` (the Native APIs of tf.keras and tf.estimator) likewise, so that `import determined`
imports no TensorFlow.
"""
from determined.common.lazy import lazy_attributes

_LAZY = {
    "Mode": "determined.experimental._native",
    "create": "determined.experimental._native",
    "create_trial_instance": "determined.experimental._native",
    "Checkpoint": "determined.experimental.client",
    "Determined": "determined.experimental.client._legacy",  # the 0.13 faces of seed 002
    "ExperimentReference": "determined.experimental.client",
    "Model": "determined.experimental.client._legacy",
    "ModelOrderBy": "determined.experimental.client",
    "ModelSortBy": "determined.experimental.client",
    "TrialReference": "determined.experimental.client",
    "keras": "determined.experimental.keras",
    "estimator": "determined.experimental.estimator",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "Checkpoint",
    "Determined",
    "ExperimentReference",
    "Model",
    "Mode",
    "ModelOrderBy",
    "ModelSortBy",
    "TrialReference",
    "create",
    "create_trial_instance",
]

