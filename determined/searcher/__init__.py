"""Search methods: pure, seeded, snapshot-able state machines that turn trial events into operations (no I/O).

`SearchMethod`, `SearcherState`, `SearchRunner`, `LocalSearchRunner` and `RemoteSearchRunner` are the custom search
API of Determined 0.19.6 to 0.37 (a search method that runs in the user's process; the runners talk to the master,
and are imported on first use from determined.experimental); the platform's own methods implement `EngineSearchMethod`.
Both return the operations defined here.
"""
from determined.common.lazy import lazy_attributes
from determined.searcher._adaptive import AdaptiveSearch, AdaptiveSimpleSearch, SyncHalvingSearch
from determined.searcher._asha import ASHASearch, AsyncHalvingSearch
from determined.searcher._asha_stopping import ASHAStoppingSearch, StoppingBracket
from determined.searcher._context import SearchContext
from determined.searcher._custom import CustomSearch
from determined.searcher._custom_search_method import SearcherState, SearchMethod
from determined.searcher._grid import GridSearch
from determined.searcher._method import ExitedReason
from determined.searcher._method import SearchMethod as EngineSearchMethod
from determined.searcher._ops import (
    Close,
    Create,
    Operation,
    Progress,
    Shutdown,
    ValidateAfter,
    operation_from_dict,
    operation_to_dict,
)
from determined.searcher._pbt import PBTSearch
from determined.searcher._preview import MAX_TRIALS, check_trial_count, format_preview, planned_trials, preview
from determined.searcher._random import RandomSearch, SingleSearch
from determined.searcher._reasons import stop_facts, stop_reason
from determined.searcher._searcher import AVAILABLE_METHODS, Searcher, make_search_method
from determined.searcher._simulate import SimTrial, SimulationError, SimulationResult, simulate

_LAZY = {
    "SearchRunner": "determined.experimental._search_runner",
    "LocalSearchRunner": "determined.experimental._search_runner",
    "RemoteSearchRunner": "determined.experimental._search_runner",
}
__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "MAX_TRIALS",
    "ASHASearch",
    "ASHAStoppingSearch",
    "AVAILABLE_METHODS",
    "AdaptiveSearch",
    "AdaptiveSimpleSearch",
    "AsyncHalvingSearch",
    "Close",
    "Create",
    "CustomSearch",
    "EngineSearchMethod",
    "LocalSearchRunner",
    "Progress",
    "RemoteSearchRunner",
    "SearchRunner",
    "SearcherState",
    "ExitedReason",
    "GridSearch",
    "Operation",
    "PBTSearch",
    "RandomSearch",
    "SearchContext",
    "SearchMethod",
    "Searcher",
    "check_trial_count",
    "planned_trials",
    "Shutdown",
    "StoppingBracket",
    "SimTrial",
    "SimulationError",
    "SimulationResult",
    "SingleSearch",
    "SyncHalvingSearch",
    "ValidateAfter",
    "format_preview",
    "make_search_method",
    "operation_from_dict",
    "operation_to_dict",
    "preview",
    "simulate",
    "stop_facts",
    "stop_reason",
]
