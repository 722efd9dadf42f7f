"""`random` and `single`: a fixed set of trials, each trained to max_length, validated and closed."""
import abc
from typing import Any, Dict, List, Set

from determined.searcher._context import SearchContext
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class FixedTrialsSearch(SearchMethod):
    """A fixed number of trials; each trains to `max_length`, validates and closes.

    On the platform the trials are created as room allows (`SearchContext.window`): the first ones at the
    start, one more each time one closes; on its own (a simulation) all of them at once. Either way the i-th
    trial has the same request id and hyperparameters. The state holds only the unfinished trials and counts.
    Subclasses say how many trials there are and the hyperparameters of the i-th.
    """

    def __init__(self, max_length: int, unit: str = "batches", max_concurrent_trials: int = 0) -> None:
        if max_length <= 0:
            raise ValueError(f"searcher.max_length: must be > 0, got {max_length}")
        self.max_length = max_length
        self.unit = unit
        self.max_concurrent_trials = max_concurrent_trials
        self.created = 0
        self.open: List[str] = []  # created, not closed yet (creation order)
        self.validated: Dict[str, int] = {}  # of open trials
        self.exited: Set[str] = set()  # open trials that exited early
        self.closed = 0
        self.total = 0  # trials of the whole search (known from the first operations on)

    @abc.abstractmethod
    def _hparams_of(self, ctx: SearchContext, index: int) -> Dict[str, Any]:
        """The hyperparameters of trial `index` (0-based), drawn after its request id."""

    @abc.abstractmethod
    def _trial_count(self, ctx: SearchContext) -> int:
        """How many trials the search has."""

    def _create(self, ctx: SearchContext) -> List[Operation]:
        """Create trials while there are more to create and room for them."""
        window = ctx.window(self.max_concurrent_trials)
        room = self.total - self.created
        if window is not None:
            room = min(room, window - len(self.open))
        ops: List[Operation] = []
        for _ in range(max(0, room)):
            request_id = ctx.new_request_id()
            values = self._hparams_of(ctx, self.created)
            self.created += 1
            self.open.append(request_id)
            ops += [Create(request_id, values), ValidateAfter(request_id, self.max_length), Close(request_id)]
        return ops

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        self.total = self._trial_count(ctx)
        return self._create(ctx)

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        if request_id in self.open:
            self.validated[request_id] = max(length, self.validated.get(request_id, 0))
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        if request_id in self.open:
            self.exited.add(request_id)
        return []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        if request_id not in self.open:
            return []
        self.open.remove(request_id)
        self.validated.pop(request_id, None)
        self.exited.discard(request_id)
        self.closed += 1
        ops = self._create(ctx)
        if self.closed >= self.total:
            ops.append(Shutdown())
        return ops

    def progress(self, trained: Trained = None) -> float:
        if not self.total:
            return 0.0
        done = float(self.closed * self.max_length)
        for request_id in self.open:
            if request_id in self.exited:
                done += self.max_length
            else:
                reached = max(self.validated.get(request_id, 0), (trained or {}).get(request_id, 0))
                done += min(reached, self.max_length)
        progress = done / float(self.total * self.max_length)
        # every trial created and reported (trained and validated, or exited): the search is as good as done
        finished = self.created >= self.total and all(
            rid in self.exited or self.validated.get(rid, 0) >= self.max_length for rid in self.open)
        return progress if finished else min(PROGRESS_BEFORE_SHUTDOWN, progress)

    def snapshot(self) -> Dict[str, Any]:
        return {
            "created": self.created,
            "open": list(self.open),
            "validated": dict(self.validated),
            "exited": sorted(self.exited),
            "closed_count": self.closed,
            "total": self.total,
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        if "request_ids" in snapshot:  # written before trials were created lazily: every trial was created
            closed = set(snapshot["closed"])
            self.created = len(snapshot["request_ids"])
            self.open = [r for r in snapshot["request_ids"] if r not in closed]
            self.closed = len(closed)
            self.total = self.created
        else:
            self.created = int(snapshot["created"])
            self.open = list(snapshot["open"])
            self.closed = int(snapshot["closed_count"])
            self.total = int(snapshot["total"])
        self.validated = {str(k): int(v) for k, v in snapshot["validated"].items() if k in self.open}
        self.exited = {r for r in snapshot["exited"] if r in self.open}


class RandomSearch(FixedTrialsSearch):
    """`max_trials` trials with sampled hyperparameters; each trains to `max_length`."""

    def __init__(self, max_length: int, max_trials: int, unit: str = "batches", max_concurrent_trials: int = 0) -> None:
        super().__init__(max_length, unit, max_concurrent_trials)
        if max_trials <= 0:
            raise ValueError(f"searcher.max_trials: must be > 0, got {max_trials}")
        self.max_trials = max_trials

    def _hparams_of(self, ctx: SearchContext, index: int) -> Dict[str, Any]:
        return ctx.sample_hparams()

    def _trial_count(self, ctx: SearchContext) -> int:
        return self.max_trials


class SingleSearch(RandomSearch):
    """One trial with one draw of the hyperparameters (random search with max_trials = 1)."""

    def __init__(self, max_length: int, unit: str = "batches") -> None:
        super().__init__(max_length=max_length, max_trials=1, unit=unit)
