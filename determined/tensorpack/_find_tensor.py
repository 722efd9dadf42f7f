"""Finding a tensor of a Tensorpack trial's training graph by the name the trial gives."""
from typing import Any

import tensorflow as tf

from determined import errors


def find_tensor(trainer: Any, name: str, what: str) -> tf.Tensor:
    """The tensor a name means: the output of an operation of that name, a tensor of that name, or that name in
    the training tower."""
    graph = tf.compat.v1.get_default_graph()
    try:
        outputs = graph.get_operation_by_name(name).outputs
        if len(outputs) == 1:
            return outputs[0]
    except (KeyError, ValueError):
        pass
    try:
        return graph.get_tensor_by_name(name)
    except (KeyError, ValueError):
        pass
    try:
        return trainer.towers.training()[0].get_tensor(name)
    except (KeyError, ValueError, AttributeError, IndexError):
        pass
    raise errors.InvalidTrialError(
        f"{what}: the training graph has no tensor {name!r}; name a scalar tensor the model builds "
        f"(e.g. tf.identity(x, name={name!r}))"
    )
