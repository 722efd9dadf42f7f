"""Search methods: pure, seeded, snapshot-able state machines that turn trial events into operations (no I/O)."""
from determined.searcher._context import SearchContext
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
from determined.searcher._random import RandomSearch, SingleSearch
from determined.searcher._searcher import AVAILABLE_METHODS, Searcher, make_search_method

__all__ = [
    "AVAILABLE_METHODS",
    "Close",
    "Create",
    "ExitedReason",
    "Operation",
    "RandomSearch",
    "SearchContext",
    "SearchMethod",
    "Searcher",
    "Shutdown",
    "SingleSearch",
    "ValidateAfter",
    "make_search_method",
    "operation_from_dict",
    "operation_to_dict",
]
