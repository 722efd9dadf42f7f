"""Search methods: pure, seeded, snapshot-able state machines that turn trial events into operations (no I/O)."""
from determined.searcher._adaptive import AdaptiveSearch, AdaptiveSimpleSearch, SyncHalvingSearch
from determined.searcher._asha import ASHASearch, AsyncHalvingSearch
from determined.searcher._asha_stopping import ASHAStoppingSearch, StoppingBracket
from determined.searcher._context import SearchContext
from determined.searcher._grid import GridSearch
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import (
    Close,
    Create,
    Operation,
    Shutdown,
    ValidateAfter,
    operation_from_dict,
    operation_to_dict,
)
from determined.searcher._pbt import PBTSearch
from determined.searcher._preview import MAX_TRIALS, check_trial_count, format_preview, planned_trials, preview
from determined.searcher._random import RandomSearch, SingleSearch
from determined.searcher._searcher import AVAILABLE_METHODS, Searcher, make_search_method
from determined.searcher._simulate import SimTrial, SimulationError, SimulationResult, simulate

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
]
