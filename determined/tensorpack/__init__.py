"""determined.tensorpack: TensorpackTrial of Determined 0.12/0.13, on Tensorpack 0.11 and TF 2.15's tf.compat.v1.

Needs Tensorpack (`pip install 'determined-revived[tensorpack]'`). Importing it installs the TensorFlow 1.x
idioms of determined.tensorflow._tf1_compat, with the TF 1.x names of the `tf` namespace that Tensorpack-era code
uses (`tf.train.AdamOptimizer`, `tf.train.exponential_decay`, ...). See docs/tensorpack.md.
"""
try:
    import tensorpack  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"determined.tensorpack needs Tensorpack, which cannot be imported here ({e}): install it with "
        "pip install 'determined-revived[tensorpack]' (tensorpack==0.11, with TensorFlow 2.15)"
    ) from e

from determined.tensorflow import _tf1_compat  # noqa: E402

_tf1_compat.install()
_tf1_compat.fill_tf1_names()

from determined.tensorpack._controller import TensorpackTrialController  # noqa: E402
from determined.tensorpack._trial import (  # noqa: E402
    Evaluator,
    NamedTensorsEvaluator,
    SchedulePoint,
    ScheduleSetter,
    TensorpackTrial,
    TFEventWriter,
)

TensorpackTrial.trial_controller_class = TensorpackTrialController

__all__ = [
    "Evaluator",
    "NamedTensorsEvaluator",
    "SchedulePoint",
    "ScheduleSetter",
    "TFEventWriter",
    "TensorpackTrial",
    "TensorpackTrialController",
]
