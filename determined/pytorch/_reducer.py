"""Reducers: how per-batch validation metrics become one value per metric."""
import enum
from typing import Any, Dict, List, Mapping, Protocol, Sequence, Tuple, Union

import numpy as np
import torch

from determined import errors


class Reducer(enum.Enum):
    """The available methods for reducing metrics available to users."""

    AVG = "avg"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


class CustomReducer(Protocol):
    """A reducer of your own, for metrics the built-in ones cannot combine exactly across slots.

    For each metric and validation, every slot calls `reset()` (when defined), then `accumulate(value)`
    for each of its batches in order; the last return value is the slot's result. The results of all
    slots (those with at least one batch), in rank order, go to `cross_slot_reduce(per_slot)`, whose
    return value is the metric. The interface is the one of `determined.estimator.MetricReducer`.
    """

    def accumulate(self, metric: Any) -> Any: ...

    def cross_slot_reduce(self, per_slot_metrics: List[Any]) -> Any: ...


AnyReducer = Union[Reducer, CustomReducer]
ReducerSpec = Union[AnyReducer, Mapping[str, AnyReducer]]

# One rank's partial result for one metric: (reduced value, number of batches it covers).
Partial = Tuple[Any, int]


def _as_array(value: Any) -> np.ndarray:
    """A numpy array for a python/numpy/torch value, without importing torch here."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64) if not isinstance(value, np.ndarray) else value


def is_custom(reducer: Any) -> bool:
    return all(callable(getattr(reducer, m, None)) for m in ("accumulate", "cross_slot_reduce"))


def _check_reducer(name: str, reducer: Any) -> AnyReducer:
    if not isinstance(reducer, Reducer) and not is_custom(reducer):
        raise errors.InvalidTrialError(
            f"evaluation_reducer() gave {reducer!r} for metric {name!r}; use det.pytorch.Reducer.AVG, SUM, MAX or "
            "MIN, or an object with accumulate(value) and cross_slot_reduce(per_slot_values) methods"
        )
    return reducer  # type: ignore[no-any-return]


def reducer_for(spec: ReducerSpec, name: str) -> AnyReducer:
    """The reducer of metric `name`: the single reducer, or its entry in a per-metric dict (AVG if absent)."""
    if isinstance(spec, Mapping):
        return _check_reducer(name, spec.get(name, Reducer.AVG))
    return _check_reducer(name, spec)


def validate_reducer_spec(spec: Any, metric_names: Sequence[str]) -> ReducerSpec:
    """Check what evaluation_reducer() returned, against the metrics evaluate_batch() produced."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(metric_names))
        if unknown:
            raise errors.InvalidTrialError(
                f"evaluation_reducer() names metrics {unknown} that evaluate_batch() does not return "
                f"(it returns {sorted(metric_names)}); give a reducer per returned metric or a single Reducer"
            )
        for name, reducer in spec.items():
            _check_reducer(name, reducer)
        return spec
    return _check_reducer("<all metrics>", spec)


def reduce_values(reducer: AnyReducer, values: List[Any]) -> Any:
    """Reduce the per-batch values of one metric on one rank."""
    if not isinstance(reducer, Reducer):
        if callable(getattr(reducer, "reset", None)):
            reducer.reset()  # type: ignore[union-attr]
        state = None
        for value in values:
            state = reducer.accumulate(value)
        return state
    if all(hasattr(v, "detach") for v in values):
        # One device-to-host copy for the whole validation instead of one per batch.
        stacked = torch.stack([v.detach().to(torch.float64) for v in values]).cpu().numpy()
    else:
        stacked = np.stack([_as_array(v) for v in values])
    if reducer is Reducer.AVG:
        return stacked.mean(axis=0)
    if reducer is Reducer.SUM:
        return stacked.sum(axis=0)
    if reducer is Reducer.MAX:
        return stacked.max(axis=0)
    return stacked.min(axis=0)


def combine_partials(reducer: AnyReducer, partials: List[Partial]) -> Any:
    """Reduce the per-rank results of one metric; AVG is weighted by the batches each rank evaluated."""
    partials = [p for p in partials if p[1] > 0]
    if not partials:
        return None
    if not isinstance(reducer, Reducer):
        return reducer.cross_slot_reduce([p[0] for p in partials])
    values = np.stack([np.asarray(p[0], dtype=np.float64) for p in partials])
    if reducer is Reducer.AVG:
        weights = np.asarray([p[1] for p in partials], dtype=np.float64)
        weights = weights.reshape((-1,) + (1,) * (values.ndim - 1))
        return (values * weights).sum(axis=0) / weights.sum()
    if reducer is Reducer.SUM:
        return values.sum(axis=0)
    if reducer is Reducer.MAX:
        return values.max(axis=0)
    return values.min(axis=0)


def to_python(value: Any) -> Any:
    """A float for a 0-d result, a (nested) list for an array result."""
    if value is None or isinstance(value, (str, bool, dict)):
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return value
    return float(array) if array.ndim == 0 else array.tolist()


class MetricAccumulator:
    """Collects the metrics dicts of evaluate_batch() on one rank and reduces them."""

    def __init__(self) -> None:
        self._values: Dict[str, List[Any]] = {}
        self.num_batches = 0

    def add(self, metrics: Mapping[str, Any]) -> None:
        if not isinstance(metrics, Mapping):
            raise errors.InvalidTrialError(
                f"evaluate_batch() must return a dict of metric name -> value, got {type(metrics).__name__}"
            )
        if self.num_batches and set(metrics) != set(self._values):
            raise errors.InvalidTrialError(
                f"evaluate_batch() returned metrics {sorted(metrics)} for one batch and {sorted(self._values)} "
                "for an earlier one; return the same metric names for every batch"
            )
        for name, value in metrics.items():
            if hasattr(value, "detach"):
                value = value.detach()
            self._values.setdefault(name, []).append(value)
        self.num_batches += 1

    def partials(self, spec: ReducerSpec) -> Dict[str, Partial]:
        """This rank's reduced value per metric, with the number of batches behind it."""
        validate_reducer_spec(spec, list(self._values))
        return {
            name: (reduce_values(reducer_for(spec, name), values), self.num_batches)
            for name, values in self._values.items()
        }
