"""tf.keras on several slots: one step of a model compiled under a MultiWorkerMirroredStrategy, and the
sharded validation whose metrics Keras reduces across the ranks.

Every rank feeds its own per-slot batch to the model's compiled train (test) function; gradients are
all-reduced by the strategy, and Keras reads its metrics (sync-on-read variables) summed over the ranks,
so a metric of a step covers the global batch and a validation metric the whole validation set.
"""
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf

from determined import core, errors


def _tuples(value: Any) -> Any:
    """Lists (several model inputs) as tuples: tf.data would stack a list into one tensor."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def _data(batch: Any) -> Any:
    """A checked batch ((x,), (x, y) or (x, y, sample_weight)) as the structure Keras's train step unpacks."""
    return _tuples(tuple(batch))


def _numbers(logs: Dict[str, Any]) -> Dict[str, Any]:
    return {name: np.asarray(value) for name, value in logs.items()}


def prepare(model: tf.keras.Model, strategy: Any, trial_name: str) -> None:
    """Check that the model lives in the strategy and read its step results as Keras reduced them."""
    if getattr(model, "distribute_strategy", None) is not strategy:
        raise errors.InvalidTrialError(
            f"{trial_name}: with several slots the model must be created and compiled inside the trial's "
            "MultiWorkerMirroredStrategy: build it in build_model() (the platform calls it in the strategy's "
            "scope), not in __init__ or at import time"
        )
    # Keras already sums the metric variables over the ranks when it reads a metric inside a step; the
    # default "sum" reduction of the step's outputs would add the ranks' (equal) values once more.
    model.distribute_reduction_method = "first"


def train_step(model: tf.keras.Model, batch: Any) -> Dict[str, Any]:
    """Train `model` on this rank's per-slot `batch` (with every other rank, on theirs): the logs of the step."""
    iterator = iter(tf.data.Dataset.from_tensors(_data(batch)))
    logs = model.make_train_function()(iterator)
    model.reset_metrics()
    return _numbers(logs)


def _empty_like(batch: Any) -> Any:
    return tf.nest.map_structure(lambda t: np.asarray(t)[:0], _data(batch))


def evaluate_shard(
    model: tf.keras.Model,
    batches: Iterator[Any],
    distributed: core.DistributedContext,
    callbacks: tf.keras.callbacks.CallbackList,
) -> Dict[str, Any]:
    """Evaluate this rank's `batches`; the metrics over the batches of every rank.

    Keras reduces metrics across the ranks in every test step, so all ranks run the same number of steps:
    a rank whose batches ran out runs an empty batch (of the shapes of the first batch any rank had),
    which changes no record-based metric (means, sums, accuracies).
    """
    model.reset_metrics()
    test_function = model.make_test_function()
    callbacks.on_test_begin()
    template: Optional[Any] = None
    step = 0
    while True:
        batch = next(batches, None)
        data = None if batch is None else _data(batch)
        offers: List[Any] = distributed.allgather(
            (data is not None, _empty_like(batch) if template is None and batch is not None else None)
        )
        if not any(has for has, _ in offers):
            break
        if template is None:
            template = next(empty for _, empty in offers if empty is not None)
        callbacks.on_test_batch_begin(step)
        logs = test_function(iter(tf.data.Dataset.from_tensors(data if data is not None else template)))
        callbacks.on_test_batch_end(step, _numbers(logs))
        step += 1
    if template is None:
        raise errors.InvalidTrialError("the validation data loader yielded no batches on any slot")
    result = _numbers(model.get_metrics_result())  # read outside the steps: summed over the ranks
    callbacks.on_test_end(dict(result))
    return result
