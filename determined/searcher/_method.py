"""The interface every search method implements: event handlers that return operations."""
import abc
import enum
from typing import Any, Dict, List, Mapping, Optional

# Units (of the method's `unit`) each trial has trained so far, by request id: what the master passes to
# `progress` so that the search's progress moves while trials train, not only when they report.
Trained = Optional[Mapping[str, float]]

# Progress stays below 1 until the search has shut down: the last trials may still be validating or closing.
PROGRESS_BEFORE_SHUTDOWN = 0.99

from determined.searcher._context import SearchContext
from determined.searcher._ops import Operation


class ExitedReason(str, enum.Enum):
    """Why a trial stopped before the searcher closed it."""

    ERRORED = "ERRORED"
    USER_CANCELED = "USER_CANCELED"
    INVALID_HP = "INVALID_HP"


class SearchMethod(abc.ABC):
    """A pure, seeded search method in the ask-and-tell style.

    The master feeds it events and carries out the operations it returns, in order. Lengths are cumulative
    and expressed in `unit` (`"batches"`, `"records"` or `"epochs"`), the unit of the searcher's config.
    A method keeps no randomness of its own: it draws from `ctx`, whose state the master snapshots with it.
    """

    unit: str = "batches"

    @abc.abstractmethod
    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        """Operations to start the search with."""

    def on_trial_created(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        """The master created the trial of a `Create` operation."""
        return []

    @abc.abstractmethod
    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        """The trial reached `length` of a `ValidateAfter` and validated with the searcher metric `metric`."""

    def on_validation_reported(self, ctx: SearchContext, request_id: str, metrics: Dict[str, Any]) -> List[Operation]:
        """A trial that runs its own loop (no `ValidateAfter`: Determined 0.38) reported validation `metrics`."""
        return []

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        """A trial reported how far it is, from 0 to 1 (`report_progress`)."""
        return []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        """The trial ended (after a `Close`, an early exit, or an error)."""
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        """The trial stopped before its operations were done; `on_trial_closed` follows."""
        return []

    @abc.abstractmethod
    def progress(self, trained: Trained = None) -> float:
        """How far the search is, from 0 to 1: the work done over the work the search plans.

        `trained` gives, per request id, the units the trial has trained so far (cumulative, as operation
        lengths are); without it only what trials reported counts.
        """

    @abc.abstractmethod
    def snapshot(self) -> Dict[str, Any]:
        """The method's whole state as JSON-serialisable data."""

    @abc.abstractmethod
    def restore(self, snapshot: Dict[str, Any]) -> None:
        """Reset the method's state to a `snapshot()`."""
