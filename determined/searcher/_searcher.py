"""Building a search method from a canonical searcher config, and the method + context pair the master drives."""
from typing import Any, Dict, List, Mapping, Tuple

from determined.searcher._context import SearchContext
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import Operation
from determined.searcher._random import RandomSearch, SingleSearch

AVAILABLE_METHODS = ("single", "random")
LATER_METHODS = ("grid", "adaptive_asha", "adaptive", "adaptive_simple", "pbt", "sync_halving", "async_halving")


def _length(searcher_config: Mapping[str, Any], field: str) -> Tuple[str, int]:
    length = searcher_config.get(field)
    if not isinstance(length, Mapping) or len(length) != 1:
        raise ValueError(
            f"searcher.{field}: expected a length with exactly one of records, batches or epochs "
            f"(e.g. {{batches: 1000}}), got {length!r}"
        )
    ((unit, value),) = length.items()
    if unit not in ("records", "batches", "epochs") or not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"searcher.{field}: expected {{records|batches|epochs: <int>}}, got {dict(length)!r}")
    return unit, value


def make_search_method(searcher_config: Mapping[str, Any]) -> SearchMethod:
    """The search method a canonical `searcher` config section describes."""
    name = searcher_config.get("name")
    if name == "single":
        unit, max_length = _length(searcher_config, "max_length")
        return SingleSearch(max_length=max_length, unit=unit)
    if name == "random":
        unit, max_length = _length(searcher_config, "max_length")
        max_trials = searcher_config.get("max_trials")
        if not isinstance(max_trials, int) or isinstance(max_trials, bool):
            raise ValueError(f"searcher.max_trials: the random searcher needs an integer max_trials, got {max_trials!r}")
        return RandomSearch(max_length=max_length, max_trials=max_trials, unit=unit)
    if name in LATER_METHODS:
        raise ValueError(
            f"searcher.name: the {name!r} search method is not available in this version yet; "
            f"use one of {', '.join(AVAILABLE_METHODS)}"
        )
    raise ValueError(f"searcher.name: unknown search method {name!r}; use one of {', '.join(AVAILABLE_METHODS)}")


class Searcher:
    """One experiment's search method together with its seeded context; what the master snapshots."""

    def __init__(self, method: SearchMethod, context: SearchContext) -> None:
        self.method = method
        self.context = context

    @classmethod
    def from_config(cls, config: Mapping[str, Any], seed: int) -> "Searcher":
        """A fresh searcher for a canonical experiment config."""
        return cls(make_search_method(config["searcher"]), SearchContext(seed, config.get("hyperparameters") or {}))

    @property
    def unit(self) -> str:
        return self.method.unit

    def initial_operations(self) -> List[Operation]:
        return self.method.initial_operations(self.context)

    def trial_created(self, request_id: str) -> List[Operation]:
        return self.method.on_trial_created(self.context, request_id)

    def validation_completed(self, request_id: str, metric: float, length: int) -> List[Operation]:
        return self.method.on_validation_completed(self.context, request_id, float(metric), int(length))

    def trial_closed(self, request_id: str) -> List[Operation]:
        return self.method.on_trial_closed(self.context, request_id)

    def trial_exited_early(self, request_id: str, reason: ExitedReason) -> List[Operation]:
        return self.method.on_trial_exited_early(self.context, request_id, ExitedReason(reason))

    def progress(self) -> float:
        return max(0.0, min(1.0, float(self.method.progress())))

    def snapshot(self) -> Dict[str, Any]:
        return {"method": self.method.snapshot(), "context": self.context.snapshot()}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.method.restore(dict(snapshot["method"]))
        self.context.restore(snapshot["context"])
