"""`random` and `single`: a fixed set of trials, each trained to max_length, validated and closed (or, without
max_length, each running its own loop until its process exits: Determined 0.38)."""
import abc
from typing import Any, Dict, Iterator, List, Optional, Set

from determined.searcher._context import SearchContext
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class FixedTrialsSearch(SearchMethod):
    """A fixed set of trials created up front; each trains to `max_length`, validates and closes. Without
    `max_length` (Determined 0.38) a trial gets no operations: it runs its own loop and ends when its process exits.

    A trial that exits with INVALID_HP is replaced by a new draw when `replaces_invalid` (random; not single or grid,
    as in Determined), without counting toward the number of trials. Progress is the mean over the trials of each
    one's progress: 1 once it ended, else the larger of its last `report_progress` and its validated length.
    Subclasses say how many trials there are and the hyperparameters of the i-th.
    """

    replaces_invalid = False

    def __init__(self, max_length: Optional[int], unit: str = "batches") -> None:
        if max_length is not None and max_length <= 0:
            raise ValueError(f"searcher.max_length: must be > 0, got {max_length}")
        self.max_length = max_length
        self.unit = unit
        self.request_ids: List[str] = []
        self.validated: Dict[str, int] = {}
        self.exited: Set[str] = set()
        self.closed: Set[str] = set()
        self.invalid: Set[str] = set()
        self.reported_progress: Dict[str, float] = {}

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
            ops += self._trial_operations(ctx.new_request_id(), next(hparams))
        return ops

    def _trial_operations(self, request_id: str, hparams: Dict[str, Any]) -> List[Operation]:
        self.request_ids.append(request_id)
        if self.max_length is None:
            return [Create(request_id, hparams)]
        return [Create(request_id, hparams), ValidateAfter(request_id, self.max_length), Close(request_id)]

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        self.validated[request_id] = max(length, self.validated.get(request_id, 0))
        return []

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        if request_id in self.request_ids:
            self.reported_progress[request_id] = min(1.0, max(0.0, float(progress)))
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        self.exited.add(request_id)
        if reason == ExitedReason.INVALID_HP and self.replaces_invalid and request_id not in self.invalid:
            self.invalid.add(request_id)
            return self._trial_operations(ctx.new_request_id(), ctx.sample_hparams())
        return []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self.closed.add(request_id)
        if len(self.closed) >= len(self.request_ids):
            return [Shutdown()]
        return []

    def progress(self) -> float:
        counted = [r for r in self.request_ids if r not in self.invalid]
        if not counted:
            return 0.0
        return sum(self._trial_progress(r) for r in counted) / float(len(counted))

    def _trial_progress(self, request_id: str) -> float:
        if request_id in self.exited or request_id in self.closed:
            return 1.0
        done = self.reported_progress.get(request_id, 0.0)
        if self.max_length is not None:
            done = max(done, min(self.validated.get(request_id, 0), self.max_length) / float(self.max_length))
        return done

    def snapshot(self) -> Dict[str, Any]:
        return {
            "request_ids": list(self.request_ids),
            "validated": dict(self.validated),
            "exited": sorted(self.exited),
            "closed": sorted(self.closed),
            "invalid": sorted(self.invalid),
            "reported_progress": dict(self.reported_progress),
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.request_ids = list(snapshot["request_ids"])
        self.validated = {str(k): int(v) for k, v in snapshot["validated"].items()}
        self.exited = set(snapshot["exited"])
        self.closed = set(snapshot["closed"])
        self.invalid = set(snapshot.get("invalid", []))
        self.reported_progress = {str(k): float(v) for k, v in (snapshot.get("reported_progress") or {}).items()}


class RandomSearch(FixedTrialsSearch):
    """Creates `max_trials` trials up front with sampled hyperparameters; each trains to `max_length` (or runs its
    own loop). A trial that exits with INVALID_HP is replaced by a new draw."""

    replaces_invalid = True

    def __init__(self, max_length: Optional[int], max_trials: int, unit: str = "batches") -> None:
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
    """One trial with one draw of the hyperparameters (random search with max_trials = 1, no replacement)."""

    replaces_invalid = False

    def __init__(self, max_length: Optional[int], unit: str = "batches") -> None:
        super().__init__(max_length=max_length, max_trials=1, unit=unit)
