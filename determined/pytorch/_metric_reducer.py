"""MetricReducer and context.wrap_reducer(): custom metrics computed exactly across slots (0.15+ API).

A trial registers reducers with ``context.wrap_reducer(...)`` and feeds them in ``train_batch`` /
``evaluate_batch`` (``reducer.update(...)``). Before every training report period and every validation the
controller resets them; at the end of it every slot calls ``per_slot_reduce()``, the results of all slots are
gathered (in rank order) and ``cross_slot_reduce(per_slot_results)`` gives the metric(s), merged into the
reported training or validation metrics.
"""
import abc
import itertools
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from determined import errors


class MetricReducer(metaclass=abc.ABCMeta):
    """A metric computed in three steps, so that it is exact with any number of slots.

    1. You collect values during training or validation in a method of your own (``update()``, say), called
       from ``train_batch()`` / ``evaluate_batch()``; each slot collects its share.
    2. ``per_slot_reduce()`` turns one slot's collection into something small and picklable.
    3. ``cross_slot_reduce(per_slot_metrics)`` gets the list of every slot's ``per_slot_reduce()`` result and
       returns the metric: a value when the reducer was wrapped with a ``name``, else a dict name -> value.

    ``reset()`` is called before every training period (the batches between two reports) and every validation.
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget the values collected so far."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """The reduction of this slot's values (picklable); called on every slot at the end of the period."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: List) -> Any:
        """The metric from the list of every slot's per_slot_reduce() result."""


class _FunctionReducer(MetricReducer):
    """What wrap_reducer() makes of a plain function: ``update(value)`` collects values; the function gets the
    flat list of every slot's values, interleaved so that batch order is kept when each slot updates once per
    batch (slot r trains batches r, r+N, ...)."""

    _MISSING = object()

    def __init__(self, fn: Callable[[List[Any]], Any]) -> None:
        self.fn = fn
        self.values: List[Any] = []

    def reset(self) -> None:
        self.values = []

    def update(self, value: Any) -> None:
        """Collect one value (e.g. one batch's predictions and labels)."""
        self.values.append(value)

    def per_slot_reduce(self) -> Any:
        return self.values

    def cross_slot_reduce(self, per_slot_metrics: List) -> Any:
        rounds = itertools.zip_longest(*per_slot_metrics, fillvalue=self._MISSING)
        return self.fn([value for one_round in rounds for value in one_round if value is not self._MISSING])


# Determined 0.14-0.38 named the function reducer `determined.pytorch._SimpleReducer`; code of that era imports it
# (0.26.0's byol_pytorch casts `wrap_reducer(fn, ...)`'s result to it).
_SimpleReducer = _FunctionReducer


class _Wrapped:
    def __init__(self, reducer: MetricReducer, name: Optional[str], for_training: bool, for_validation: bool) -> None:
        self.reducer = reducer
        self.name = name
        self.for_training = for_training
        self.for_validation = for_validation

    def describe(self) -> str:
        if isinstance(self.reducer, _FunctionReducer):
            return f"reducer function {getattr(self.reducer.fn, '__name__', repr(self.reducer.fn))}()"
        return f"MetricReducer {type(self.reducer).__name__}"

    def call(self, method: str, *args: Any) -> Any:
        """Run one of the user's methods; an error names the reducer and the method."""
        try:
            return getattr(self.reducer, method)(*args)
        except errors.InvalidTrialError:
            raise
        except Exception as e:
            raise errors.InvalidTrialError(
                f"the {self.describe()} wrapped with wrap_reducer(name={self.name!r}) failed in {method}(): "
                f"{type(e).__name__}: {e}"
            ) from e


R = TypeVar("R", bound=MetricReducer)


class ReducerRegistry:
    """The reducers a trial wrapped, in the order it wrapped them."""

    def __init__(self) -> None:
        self._wrapped: List[_Wrapped] = []

    def wrap(
        self,
        reducer: Union[Callable[[List[Any]], Any], R],
        name: Optional[str] = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Union[_FunctionReducer, R]:
        if any(w.reducer is reducer for w in self._wrapped):
            raise errors.InvalidTrialError(
                f"wrap_reducer() got the same reducer {reducer!r} twice; wrap each reducer once and keep the "
                "object it returns"
            )
        if name is not None and not isinstance(name, str):
            raise errors.InvalidTrialError(f"wrap_reducer(name=...) must be a metric name (str) or None, got {name!r}")
        if isinstance(reducer, MetricReducer):
            wrapped_reducer: MetricReducer = reducer
        elif callable(reducer):
            wrapped_reducer = _FunctionReducer(reducer)
        else:
            raise errors.InvalidTrialError(
                f"wrap_reducer() takes a function (of the list of all values) or a det.pytorch.MetricReducer, got "
                f"{type(reducer).__name__}"
            )
        if not (for_training or for_validation):
            raise errors.InvalidTrialError(
                "wrap_reducer(for_training=False, for_validation=False) would never report its metric; set one of them"
            )
        self._wrapped.append(_Wrapped(wrapped_reducer, name, bool(for_training), bool(for_validation)))
        return wrapped_reducer  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._wrapped)

    def reset(self) -> None:
        """Reset every reducer (before a training period or a validation)."""
        for wrapped in self._wrapped:
            wrapped.call("reset")

    def _selected(self, for_training: bool) -> List[_Wrapped]:
        return [w for w in self._wrapped if (w.for_training if for_training else w.for_validation)]

    def per_slot(self, for_training: bool) -> List[Any]:
        """This slot's per_slot_reduce() result of each reducer of the period kind, in wrapping order."""
        return [w.call("per_slot_reduce") for w in self._selected(for_training)]

    def cross_slot(self, for_training: bool, gathered: List[List[Any]]) -> Dict[str, Any]:
        """The metrics from every slot's per_slot() list (in rank order)."""
        metrics: Dict[str, Any] = {}
        for index, wrapped in enumerate(self._selected(for_training)):
            value = wrapped.call("cross_slot_reduce", [slot[index] for slot in gathered])
            if wrapped.name is None:
                if not isinstance(value, dict):
                    raise errors.InvalidTrialError(
                        f"the {wrapped.describe()} was wrapped with name=None, so it must return a dict of metric "
                        f"name -> value, but it returned a {type(value).__name__}; pass name='...' to wrap_reducer() "
                        "for a single metric"
                    )
                metrics.update(value)
            else:
                if isinstance(value, dict):
                    raise errors.InvalidTrialError(
                        f"the {wrapped.describe()} was wrapped with name={wrapped.name!r} but returned a dict; return "
                        "a single value, or wrap it with name=None to report several metrics"
                    )
                metrics[wrapped.name] = value
        return metrics

    def reduce(self, for_training: bool, allgather: Callable[[Any], List[Any]]) -> Dict[str, Any]:
        """Every slot calls this at the same point: per-slot reduce, gather, cross-slot reduce."""
        if not self._selected(for_training):
            return {}
        return self.cross_slot(for_training, allgather(self.per_slot(for_training)))
