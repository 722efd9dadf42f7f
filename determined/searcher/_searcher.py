"""Building a search method from a canonical searcher config, and the method + context pair the master drives."""
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from determined.config.searchers import SEARCHER_NAMES, searcher_drives_trials
from determined.searcher._adaptive import AdaptiveSearch, AdaptiveSimpleSearch, SyncHalvingSearch
from determined.searcher._asha import ASHASearch, AsyncHalvingSearch
from determined.searcher._asha_stopping import ASHAStoppingSearch
from determined.searcher._config_fields import config_int, optional_config_length
from determined.searcher._context import SearchContext
from determined.searcher._custom import CustomSearch
from determined.searcher._grid import GridSearch
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import Operation, Progress
from determined.searcher._pbt import PBTSearch
from determined.searcher._random import RandomSearch, SingleSearch

AVAILABLE_METHODS = SEARCHER_NAMES


_FACTORIES: Dict[str, Callable[[Mapping[str, Any]], SearchMethod]] = {
    "grid": GridSearch.from_config,
    "adaptive_asha": ASHASearch.from_config,
    "async_halving": AsyncHalvingSearch.from_config,
    "adaptive": AdaptiveSearch.from_config,
    "adaptive_simple": AdaptiveSimpleSearch.from_config,
    "sync_halving": SyncHalvingSearch.from_config,
    "pbt": PBTSearch.from_config,
    "custom": CustomSearch.from_config,
}


def make_search_method(searcher_config: Mapping[str, Any]) -> SearchMethod:
    """The search method a canonical `searcher` config section describes."""
    name = searcher_config.get("name")
    if name == "single":
        unit, max_length = optional_config_length(searcher_config, "max_length")
        return SingleSearch(max_length=max_length, unit=unit)
    if name == "random":
        unit, max_length = optional_config_length(searcher_config, "max_length")
        return RandomSearch(max_length=max_length, max_trials=config_int(searcher_config, "max_trials"), unit=unit,
                            max_concurrent_trials=config_int(searcher_config, "max_concurrent_trials", 0))
    if name in ("adaptive_asha", "async_halving") and not searcher_drives_trials(searcher_config):
        return ASHAStoppingSearch.from_config(searcher_config)
    if isinstance(name, str) and name in _FACTORIES:
        return _FACTORIES[name](searcher_config)
    raise ValueError(f"searcher.name: unknown search method {name!r}; use one of {', '.join(AVAILABLE_METHODS)}")


class Searcher:
    """One experiment's search method together with its seeded context; what the master snapshots."""

    def __init__(self, method: SearchMethod, context: SearchContext) -> None:
        self.method = method
        self.context = context

    @classmethod
    def from_config(cls, config: Mapping[str, Any], seed: int, capacity: Optional[int] = None) -> "Searcher":
        """A fresh searcher for a canonical experiment config; `capacity`: see SearchContext (None on its own)."""
        return cls(make_search_method(config["searcher"]),
                   SearchContext(seed, config.get("hyperparameters") or {}, capacity))

    @property
    def unit(self) -> str:
        return self.method.unit

    def initial_operations(self) -> List[Operation]:
        return self.method.initial_operations(self.context)

    def trial_created(self, request_id: str) -> List[Operation]:
        return self.method.on_trial_created(self.context, request_id)

    def validation_completed(self, request_id: str, metric: Any, length: int) -> List[Operation]:
        """`metric`: a number; a custom search's may be any JSON value, handed to its runner as it is."""
        if not isinstance(metric, (dict, list, str)):
            metric = float(metric)
        return self.method.on_validation_completed(self.context, request_id, metric, int(length))

    def validation_reported(self, request_id: str, metrics: Dict[str, Any]) -> List[Operation]:
        return self.method.on_validation_reported(self.context, request_id, dict(metrics))

    def trial_progress(self, request_id: str, progress: float) -> List[Operation]:
        return self.method.on_trial_progress(self.context, request_id, float(progress))

    def operations_posted(self, event_id: int, operations: Sequence[Union[Operation, Progress]]) -> List[Operation]:
        """A custom search's runner answered event `event_id` (only the `custom` method takes posted operations)."""
        if not isinstance(self.method, CustomSearch):
            raise ValueError("only an experiment with searcher.name: custom takes operations from a search runner")
        return self.method.on_operations_posted(self.context, int(event_id), operations)

    def trial_closed(self, request_id: str) -> List[Operation]:
        return self.method.on_trial_closed(self.context, request_id)

    def trial_exited_early(self, request_id: str, reason: ExitedReason) -> List[Operation]:
        return self.method.on_trial_exited_early(self.context, request_id, ExitedReason(reason))

    def progress(self, trained: Optional[Mapping[str, float]] = None) -> float:
        """How far the search is (0 to 1), counting what trials trained so far when `trained` is given."""
        value = self.method.progress(trained) if trained else self.method.progress()
        return max(0.0, min(1.0, float(value)))

    def snapshot(self) -> Dict[str, Any]:
        return {"method": self.method.snapshot(), "context": self.context.snapshot()}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.method.restore(dict(snapshot["method"]))
        self.context.restore(snapshot["context"])
