"""`custom` (Determined 0.19.6 to 0.37): a search method whose decisions come from a runner outside the master.

The master drives it like any other method, but its event handlers decide nothing: they queue the events for the
search runner (`determined.searcher.LocalSearchRunner` / `RemoteSearchRunner`), which fetches them, asks the user's
search method, and posts back the operations that method returned, acknowledging the events it handled. Those
operations reach the master as the `operations_posted` event, whose handler returns them: from there on they are
carried out, journaled and snapshotted as every other method's operations. The queue is part of the snapshot, so a
restarted master, or a runner that went away and comes back, loses no event.
"""
from typing import Any, Dict, List, Optional, Sequence

from determined.searcher._context import MAX_TRIALS, SearchContext
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Progress, Shutdown, ValidateAfter
from determined.searcher._wire import event

# Events wait here until the runner acknowledges them. A trial makes a handful; progress reports, which are many,
# are coalesced (one pending per trial), so the queue stays below a few events per trial of the search.
MAX_PENDING_EVENTS = 8 * MAX_TRIALS


class CustomSearch(SearchMethod):
    """The master's half of a custom search: a queue of events out, posted operations in."""

    def __init__(self, unit: str = "batches", smaller_is_better: bool = True) -> None:
        self.unit = unit
        self.smaller_is_better = smaller_is_better
        self.events: List[Dict[str, Any]] = []  # pending, in order, each with its "id"
        self.last_event_id = 0
        self.reported_progress = 0.0  # the runner's last Progress operation

    @classmethod
    def from_config(cls, searcher_config: Any) -> "CustomSearch":
        return cls(unit=str(searcher_config.get("unit") or "batches"),
                   smaller_is_better=bool(searcher_config.get("smaller_is_better", True)))

    def describe(self) -> Dict[str, Any]:
        """What a preview can say: nothing about trials; the search runner decides them."""
        return {"trials": None, "total_length": None,
                "note": "a custom search: its search runner (LocalSearchRunner) decides the trials and their lengths"}

    # ---------------------------------------------------------------- events out

    def _queue(self, kind: str, **fields: Any) -> List[Operation]:
        if len(self.events) >= MAX_PENDING_EVENTS:
            return [Shutdown(failure=True, message=(
                f"the custom search's runner left {len(self.events)} events unanswered; the search stopped (run its "
                "search runner, e.g. LocalSearchRunner.run, while the experiment is active)"))]
        self.last_event_id += 1
        self.events.append(event(self.last_event_id, kind, **fields))
        return []

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        return self._queue("initialOperations")

    def on_trial_created(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        return self._queue("trialCreated", requestId=request_id)

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: Any, length: int) -> List[Operation]:
        value = metric if isinstance(metric, (dict, list, str)) else float(metric)  # a JSON metric goes as it is
        return self._queue("validationCompleted", requestId=request_id, metric=value, validateAfterLength=length)

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        for pending in self.events:  # one pending progress report per trial: the newest value
            report = pending.get("trialProgress")
            if report is not None and report["requestId"] == request_id:
                report["partialUnits"] = float(progress)
                return []
        return self._queue("trialProgress", requestId=request_id, partialUnits=float(progress))

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        return self._queue("trialClosed", requestId=request_id)

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        return self._queue("trialExitedEarly", requestId=request_id, exitedReason=ExitedReason(reason).value)

    # ---------------------------------------------------------------- operations in

    def pending_events(self) -> List[Dict[str, Any]]:
        """The events the runner has not acknowledged yet, oldest first."""
        return [dict(e) for e in self.events]

    def acknowledge(self, event_id: int) -> bool:
        """Drop the events up to `event_id`; False when `event_id` is not pending (answered before: a runner that
        resumed and posted again), and then nothing changes."""
        if not any(e["id"] == event_id for e in self.events):
            return False
        self.events = [e for e in self.events if e["id"] > event_id]
        return True

    def on_operations_posted(self, ctx: SearchContext, event_id: int, operations: Sequence[Operation]) -> List[Operation]:
        """The runner answered event `event_id` with `operations`: acknowledge it and return them to be carried out
        (Progress operations set the search's progress here). A repeated answer to an event is ignored."""
        if not self.acknowledge(int(event_id)):
            return []
        ops: List[Operation] = []
        for op in operations:
            if isinstance(op, Progress):
                self.reported_progress = min(1.0, max(0.0, float(op.progress)))
                continue
            ops.append(op)
        return ops

    def check_operations(self, operations: Sequence[Operation], known: Sequence[str]) -> List[str]:
        """Problems with posted operations before anything is done: unknown or repeated request ids, bad lengths,
        too many trials. `known`: request ids of the experiment's trials."""
        problems: List[str] = []
        ids = set(known)
        for i, op in enumerate(operations):
            where = f"searcherOperations[{i}]"
            if isinstance(op, Create):
                if str(op.request_id) in ids:
                    problems.append(f"{where}: a trial with request id {op.request_id} exists already; use a new id "
                                    "(e.g. uuid.uuid4())")
                ids.add(str(op.request_id))
            elif isinstance(op, (ValidateAfter, Close)) and str(op.request_id) not in ids:
                problems.append(f"{where}: no trial with request id {op.request_id}; create it first (Create)")
            if isinstance(op, ValidateAfter) and op.length < 1:
                problems.append(f"{where}: length must be a positive number of {self.unit}, got {op.length}")
        if len(ids) > MAX_TRIALS:
            problems.append(f"the search would have {len(ids)} trials, more than the {MAX_TRIALS} one experiment may "
                            "have; close the search (Shutdown) or split it into several experiments")
        return problems

    # ---------------------------------------------------------------- state

    def progress(self, trained: Trained = None) -> float:
        return min(PROGRESS_BEFORE_SHUTDOWN, self.reported_progress)

    def snapshot(self) -> Dict[str, Any]:
        return {"events": [dict(e) for e in self.events], "last_event_id": self.last_event_id,
                "reported_progress": self.reported_progress}

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.events = [dict(e) for e in snapshot.get("events", [])]
        self.last_event_id = int(snapshot.get("last_event_id", 0))
        self.reported_progress = float(snapshot.get("reported_progress", 0.0))


def experiment_inactive(state: str) -> Dict[str, Any]:
    """The event that tells a runner the experiment does not run (paused, or ended: then its loop ends)."""
    return event(-1, "experimentInactive", experimentState=state)


def is_custom(searcher_config: Optional[Dict[str, Any]]) -> bool:
    return (searcher_config or {}).get("name") == "custom"
