"""The ranks and the tf.distribute strategy of `DistributedContext.from_tf_config()`, read from TF_CONFIG.

TF_CONFIG is what `determined.launch.tensorflow` writes; it is read and checked without TensorFlow, which is
imported only to build the strategy.
"""
import json
import os
from typing import Any, Tuple, Type, TypeVar

from determined import errors

Context = TypeVar("Context")


def parse_tf_config() -> Tuple[int, list]:
    """(this task's index, the worker addresses) of TF_CONFIG; (0, []) when TF_CONFIG is unset."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0, []
    try:
        config = json.loads(raw)
        workers = list(config.get("cluster", {}).get("worker", []))
        task = config.get("task", {})
    except (ValueError, AttributeError, TypeError):
        raise errors.DeterminedError(
            f"TF_CONFIG is not a JSON object with cluster.worker and task: {raw[:200]!r}"
        ) from None
    kind = task.get("type", "worker")
    if kind != "worker":
        raise errors.DeterminedError(
            f"from_tf_config(): TF_CONFIG's task type is {kind!r}; only 'worker' tasks are supported "
            "(MultiWorkerMirroredStrategy, as determined.launch.tensorflow sets it)"
        )
    index = task.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < max(1, len(workers)):
        raise errors.DeterminedError(f"from_tf_config(): TF_CONFIG's task index {index!r} is not a worker of "
                                     f"{workers!r}")
    return index, workers


def context_and_strategy(cls: Type[Context]) -> Tuple[Context, Any]:
    """`(cls(...), strategy)` for TF_CONFIG: see `DistributedContext.from_tf_config()`."""
    index, workers = parse_tf_config()  # a bad TF_CONFIG is refused before TensorFlow loads
    import tensorflow as tf

    if len(workers) > 1:
        chief = str(workers[0]).rsplit(":", 1)[0]
        port = os.environ.get("DET_CHIEF_PORT", "")
        context = cls(rank=index, size=len(workers), local_rank=0, local_size=1, cross_rank=index,
                      cross_size=len(workers), chief_ip=chief,
                      **({"pub_port": int(port)} if port.isdigit() else {}))
        return context, tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return cls(), tf.distribute.MirroredStrategy()
    return cls(), tf.distribute.get_strategy()
