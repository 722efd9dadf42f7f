"""`random` and `single`: a fixed set of trials, each trained to max_length, validated and closed."""
from typing import Any, Dict, List, Set

from determined.searcher._context import SearchContext
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class RandomSearch(SearchMethod):
    """Creates `max_trials` trials up front with sampled hyperparameters; each trains to `max_length`."""

    def __init__(self, max_length: int, max_trials: int, unit: str = "batches") -> None:
        if max_length <= 0:
            raise ValueError(f"searcher.max_length: must be > 0, got {max_length}")
        if max_trials <= 0:
            raise ValueError(f"searcher.max_trials: must be > 0, got {max_trials}")
        self.max_length = max_length
        self.max_trials = max_trials
        self.unit = unit
        self.request_ids: List[str] = []
        self.validated: Dict[str, int] = {}
        self.exited: Set[str] = set()
        self.closed: Set[str] = set()

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        ops: List[Operation] = []
        for _ in range(self.max_trials):
            request_id = ctx.new_request_id()
            self.request_ids.append(request_id)
            ops += [
                Create(request_id, ctx.sample_hparams()),
                ValidateAfter(request_id, self.max_length),
                Close(request_id),
            ]
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

    def progress(self) -> float:
        done = 0
        for request_id in self.request_ids:
            if request_id in self.exited or request_id in self.closed:
                done += self.max_length
            else:
                done += min(self.validated.get(request_id, 0), self.max_length)
        return done / float(self.max_trials * self.max_length)

    def snapshot(self) -> Dict[str, Any]:
        return {
            "request_ids": list(self.request_ids),
            "validated": dict(self.validated),
            "exited": sorted(self.exited),
            "closed": sorted(self.closed),
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.request_ids = list(snapshot["request_ids"])
        self.validated = {k: int(v) for k, v in snapshot["validated"].items()}
        self.exited = set(snapshot["exited"])
        self.closed = set(snapshot["closed"])


class SingleSearch(RandomSearch):
    """One trial with one draw of the hyperparameters (random search with max_trials = 1)."""

    def __init__(self, max_length: int, unit: str = "batches") -> None:
        super().__init__(max_length=max_length, max_trials=1, unit=unit)
