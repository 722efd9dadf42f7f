"""Custom validation metrics: make_metric() turns a per-batch tensor and a reducer into eval_metric_ops."""
import abc
import copy
import logging
from typing import Any, Callable, List, Tuple, Union

import numpy as np
import tensorflow as tf

from determined import errors

logger = logging.getLogger("determined.estimator")


class MetricReducer(abc.ABC):
    """Reduces a validation metric in two steps: ``accumulate`` each batch on each slot, then
    ``cross_slot_reduce`` the slots' accumulated states into the final value.

    ``make_metric`` uses a fresh copy of the reducer for every evaluation, so state kept on ``self``
    starts over each time.
    """

    @abc.abstractmethod
    def accumulate(self, metric: Any) -> Any:
        """Called for each batch of the validation data with the value of the ``metric`` tensors (numpy
        arrays of ``numpy_dtype``, in the structure given to ``make_metric``). Returns the state accumulated
        so far: the last return value on each slot is that slot's entry in ``cross_slot_reduce``."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: List[Any]) -> Any:
        """Called once per evaluation with the accumulated state of every slot; returns the metric's value."""


Reducer = Union[MetricReducer, Callable[[List[Any]], Any]]


class _FunctionReducer(MetricReducer):
    """A plain reducer function applied to the list of every batch's value, over all slots."""

    def __init__(self, fn: Callable[[List[Any]], Any]) -> None:
        self._fn = fn
        self._values: List[Any] = []

    def accumulate(self, metric: Any) -> Any:
        self._values.append(metric)
        return self._values

    def cross_slot_reduce(self, per_slot_metrics: List[Any]) -> Any:
        return self._fn([value for slot in per_slot_metrics for value in slot])


class _MetricState:
    """One evaluation's accumulation of one metric (its reducer, and whether any batch arrived)."""

    def __init__(self, reducer: MetricReducer, structure: Any, numpy_dtype: Any, allgather: Callable[[Any], List[Any]]):
        self.reducer = reducer
        self.structure = structure
        self.numpy_dtype = numpy_dtype
        self.allgather = allgather
        self.state: Any = None
        self.batches = 0

    def update(self, *flat: Any) -> np.ndarray:
        values = [np.asarray(v, dtype=self.numpy_dtype) for v in flat]
        self.state = self.reducer.accumulate(tf.nest.pack_sequence_as(self.structure, values))
        self.batches += 1
        return np.asarray(True)

    def value(self) -> Any:
        per_slot = [s for s, n in self.allgather((self.state, self.batches)) if n]
        if not per_slot:
            raise errors.DeterminedError(
                "make_metric(): the metric saw no validation batches, so it has no value; check that the "
                "validation input_fn yields data"
            )
        result = self.reducer.cross_slot_reduce(per_slot)
        return np.asarray(result, dtype=self.numpy_dtype)


def make_metric(
    metric: Any,
    reducer: Reducer,
    numpy_dtype: Any,
    allgather: Callable[[Any], List[Any]],
) -> Tuple[tf.Tensor, tf.Operation]:
    """The (value_op, update_op) pair of a custom metric, for an EstimatorSpec's eval_metric_ops."""
    if isinstance(reducer, MetricReducer):
        instance: MetricReducer = copy.deepcopy(reducer)
    elif callable(reducer):
        instance = _FunctionReducer(reducer)
    else:
        raise errors.InvalidTrialError(
            f"make_metric(): reducer must be a det.estimator.MetricReducer or a function of a list of batch "
            f"values (e.g. np.mean), got {type(reducer).__name__}"
        )
    try:
        dtype = np.dtype(numpy_dtype)
    except TypeError:
        raise errors.InvalidTrialError(
            f"make_metric(): numpy_dtype must be a numpy dtype (e.g. np.float32), got {numpy_dtype!r}"
        ) from None
    flat = tf.nest.flatten(metric)
    if not flat or not all(tf.is_tensor(t) for t in flat):
        raise errors.InvalidTrialError(
            "make_metric(): metric must be a tensor or a nested structure (dict, list, tuple) of tensors, "
            f"got {metric!r}"
        )
    state = _MetricState(instance, metric, dtype, allgather)
    update_op = tf.compat.v1.py_func(state.update, flat, tf.bool, stateful=True, name="det_metric_update")
    value_op = tf.compat.v1.py_func(state.value, [], tf.as_dtype(dtype), stateful=True, name="det_metric_value")
    return value_op, update_op
