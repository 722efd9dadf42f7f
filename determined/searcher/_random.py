"""`random` and `single`: a fixed set of trials, each trained to max_length, validated and closed (or, without
max_length, each running its own loop until its process exits: Determined 0.38)."""
import abc
from typing import Any, Dict, List, Optional, Set

from determined.searcher._context import MAX_TRIALS, SearchContext
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class FixedTrialsSearch(SearchMethod):
    """A fixed number of trials; each trains to `max_length`, validates and closes. Without `max_length`
    (Determined 0.38) a trial gets no operations: it runs its own loop and ends when its process exits.

    A trial that exits with INVALID_HP is replaced by a new draw when `replaces_invalid` (random; not single or grid,
    as in Determined), without counting toward the number of trials. Progress is the mean over the counted trials of
    each one's progress: 1 once it ended, else the larger of its last `report_progress` and its validated length
    (trials not created yet count 0).

    On the platform the trials are created as room allows (`SearchContext.window`): the first ones at the
    start, one more each time one closes; on its own (a simulation) all of them at once. Either way the i-th
    trial has the same request id and hyperparameters. The state holds only the unfinished trials and counts.
    Subclasses say how many trials there are and the hyperparameters of the i-th.
    """

    replaces_invalid = False

    def __init__(self, max_length: Optional[int], unit: str = "batches", max_concurrent_trials: int = 0) -> None:
        if max_length is not None and max_length <= 0:
            raise ValueError(f"searcher.max_length: must be > 0, got {max_length}")
        self.max_length = max_length
        self.unit = unit
        self.max_concurrent_trials = max_concurrent_trials
        self.created = 0
        self.open: List[str] = []  # created, not closed yet (creation order)
        self.validated: Dict[str, int] = {}  # of open trials
        self.exited: Set[str] = set()  # open trials that exited early
        self.closed = 0
        self.total = 0  # trials of the whole search (known from the first operations on), replacements included
        self.invalid: Set[str] = set()  # open trials that exited with INVALID_HP (replaced)
        self.replaced = 0  # trials that exited with INVALID_HP, open or closed
        self.closed_invalid = 0
        self.reported_progress: Dict[str, float] = {}  # of open trials

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
            ops.append(Create(request_id, values))
            if self.max_length is not None:
                ops += [ValidateAfter(request_id, self.max_length), Close(request_id)]
        return ops

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        self.total = self._trial_count(ctx)
        return self._create(ctx)

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        if request_id in self.open:
            self.validated[request_id] = max(length, self.validated.get(request_id, 0))
        return []

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        if request_id in self.open:
            self.reported_progress[request_id] = min(1.0, max(0.0, float(progress)))
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        if request_id not in self.open:
            return []
        self.exited.add(request_id)
        if (reason == ExitedReason.INVALID_HP and self.replaces_invalid and request_id not in self.invalid
                and self.total < MAX_TRIALS):
            self.invalid.add(request_id)
            self.replaced += 1
            self.total += 1  # a new draw takes its place, as room allows
            return self._create(ctx)
        return []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        if request_id not in self.open:
            return []
        self.open.remove(request_id)
        self.validated.pop(request_id, None)
        self.exited.discard(request_id)
        self.reported_progress.pop(request_id, None)
        if request_id in self.invalid:
            self.invalid.discard(request_id)
            self.closed_invalid += 1
        self.closed += 1
        ops = self._create(ctx)
        if self.closed >= self.total:
            ops.append(Shutdown())
        return ops

    def progress(self, trained: Trained = None) -> float:
        counted = self.total - self.replaced
        if counted <= 0:
            return 0.0
        done = float(self.closed - self.closed_invalid)
        done += sum(self._trial_progress(r, trained) for r in self.open if r not in self.invalid)
        progress = done / counted
        # every trial created and reported (trained and validated, or exited): the search is as good as done
        finished = self.created >= self.total and all(
            rid in self.exited or (self.max_length is not None and self.validated.get(rid, 0) >= self.max_length)
            for rid in self.open)
        return progress if finished else min(PROGRESS_BEFORE_SHUTDOWN, progress)

    def _trial_progress(self, request_id: str, trained: Trained) -> float:
        """1 once it exited; else the larger of its last `report_progress` and what it trained or validated of
        max_length."""
        if request_id in self.exited:
            return 1.0
        done = self.reported_progress.get(request_id, 0.0)
        if self.max_length is not None:
            reached = max(self.validated.get(request_id, 0), (trained or {}).get(request_id, 0))
            done = max(done, min(reached, self.max_length) / float(self.max_length))
        return done

    def snapshot(self) -> Dict[str, Any]:
        return {
            "created": self.created,
            "open": list(self.open),
            "validated": dict(self.validated),
            "exited": sorted(self.exited),
            "closed_count": self.closed,
            "total": self.total,
            "invalid": sorted(self.invalid),
            "replaced": self.replaced,
            "closed_invalid": self.closed_invalid,
            "reported_progress": dict(self.reported_progress),
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
        self.invalid = {r for r in snapshot.get("invalid", []) if r in self.open}
        self.replaced = int(snapshot.get("replaced", 0))
        self.closed_invalid = int(snapshot.get("closed_invalid", 0))
        self.reported_progress = {str(k): float(v) for k, v in (snapshot.get("reported_progress") or {}).items()
                                  if k in self.open}


class RandomSearch(FixedTrialsSearch):
    """`max_trials` trials with sampled hyperparameters; each trains to `max_length` (or runs its own loop). A trial
    that exits with INVALID_HP is replaced by a new draw."""

    replaces_invalid = True

    def __init__(self, max_length: Optional[int], max_trials: int, unit: str = "batches", max_concurrent_trials: int = 0) -> None:
        super().__init__(max_length, unit, max_concurrent_trials)
        if max_trials <= 0:
            raise ValueError(f"searcher.max_trials: must be > 0, got {max_trials}")
        self.max_trials = max_trials

    def _hparams_of(self, ctx: SearchContext, index: int) -> Dict[str, Any]:
        return ctx.sample_hparams()

    def _trial_count(self, ctx: SearchContext) -> int:
        return self.max_trials


class SingleSearch(RandomSearch):
    """One trial with one draw of the hyperparameters (random search with max_trials = 1, no replacement)."""

    replaces_invalid = False

    def __init__(self, max_length: Optional[int], unit: str = "batches") -> None:
        super().__init__(max_length=max_length, max_trials=1, unit=unit)
