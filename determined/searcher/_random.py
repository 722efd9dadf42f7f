"""`random` and `single`: a fixed set of trials, each trained to max_length, validated and closed."""
import abc
from typing import Any, Dict, Iterator, List, Set

from determined.searcher._context import SearchContext
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class FixedTrialsSearch(SearchMethod):
    """A fixed set of trials created up front; each trains to `max_length`, validates and closes.

    Subclasses say how many trials there are and the hyperparameters of the i-th.
    """

    def __init__(self, max_length: int, unit: str = "batches") -> None:
        if max_length <= 0:
            raise ValueError(f"searcher.max_length: must be > 0, got {max_length}")
        self.max_length = max_length
        self.unit = unit
        self.request_ids: List[str] = []
        self.validated: Dict[str, int] = {}
        self.exited: Set[str] = set()
        self.closed: Set[str] = set()

    @abc.abstractmethod
    def _trial_hparams(self, ctx: SearchContext) -> Iterator[Dict[str, Any]]:
        """The hyperparameters of each trial, drawn lazily: each trial's request id is drawn before them."""

    @abc.abstractmethod
    def _trial_count(self, ctx: SearchContext) -> int:
        """How many trials `_trial_hparams` yields."""

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        ops: List[Operation] = []
        hparams = self._trial_hparams(ctx)
        for _ in range(self._trial_count(ctx)):
            request_id = ctx.new_request_id()
            values = next(hparams)
            self.request_ids.append(request_id)
            ops += [Create(request_id, values), ValidateAfter(request_id, self.max_length), Close(request_id)]
        return ops

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        self.validated[request_id] = max(length, self.validated.get(request_id, 0))
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        self.exited.add(request_id)
        return []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self.closed.add(request_id)
        if len(self.closed) >= len(self.request_ids):
            return [Shutdown()]
        return []

    def progress(self, trained: Trained = None) -> float:
        if not self.request_ids:
            return 0.0
        done = 0.0
        for request_id in self.request_ids:
            if request_id in self.exited or request_id in self.closed:
                done += self.max_length
            else:
                reached = max(self.validated.get(request_id, 0), (trained or {}).get(request_id, 0))
                done += min(reached, self.max_length)
        progress = done / float(len(self.request_ids) * self.max_length)
        finished = all(rid in self.exited or rid in self.closed or self.validated.get(rid, 0) >= self.max_length
                       for rid in self.request_ids)  # every trial reported: trained and validated
        return progress if finished else min(PROGRESS_BEFORE_SHUTDOWN, progress)

    def snapshot(self) -> Dict[str, Any]:
        return {
            "request_ids": list(self.request_ids),
            "validated": dict(self.validated),
            "exited": sorted(self.exited),
            "closed": sorted(self.closed),
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.request_ids = list(snapshot["request_ids"])
        self.validated = {str(k): int(v) for k, v in snapshot["validated"].items()}
        self.exited = set(snapshot["exited"])
        self.closed = set(snapshot["closed"])


class RandomSearch(FixedTrialsSearch):
    """Creates `max_trials` trials up front with sampled hyperparameters; each trains to `max_length`."""

    def __init__(self, max_length: int, max_trials: int, unit: str = "batches") -> None:
        super().__init__(max_length, unit)
        if max_trials <= 0:
            raise ValueError(f"searcher.max_trials: must be > 0, got {max_trials}")
        self.max_trials = max_trials

    def _trial_hparams(self, ctx: SearchContext) -> Iterator[Dict[str, Any]]:
        while True:
            yield ctx.sample_hparams()

    def _trial_count(self, ctx: SearchContext) -> int:
        return self.max_trials


class SingleSearch(RandomSearch):
    """One trial with one draw of the hyperparameters (random search with max_trials = 1)."""

    def __init__(self, max_length: int, unit: str = "batches") -> None:
        super().__init__(max_length=max_length, max_trials=1, unit=unit)
