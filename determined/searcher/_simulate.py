"""Playing the master for any search method, with no training: an objective gives the metrics.

The harness keeps an operation queue per trial as the master does and feeds events in the master's order
(initial -> trial_created -> validation_completed -> trial_exited_early -> trial_closed). Time is simulated:
a trial holding a slot trains one length unit per tick, so the trial whose queued length is reached first
reports first (ties: the trial that started its work first). A trial holds a slot only while it has queued
work; up to `max_concurrent` trials (0: no limit) hold slots, given out in creation order.
"""
import collections
import copy
import dataclasses
import heapq
import json
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Set, Tuple

from determined.searcher._context import SearchContext
from determined.searcher._method import ExitedReason, SearchMethod
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter
from determined.searcher._searcher import Searcher

Objective = Callable[[str, Dict[str, Any], int, Optional[str]], float]
ExitEarly = Callable[[str, Dict[str, Any], int], Optional[ExitedReason]]
EventHook = Callable[[str, Dict[str, Any]], None]


class SimulationError(RuntimeError):
    """The search method did something the master would refuse, or never finished."""


@dataclasses.dataclass
class SimTrial:
    request_id: str
    hparams: Dict[str, Any]
    parent: Optional[str]
    start_length: int
    validations: List[Tuple[int, float]] = dataclasses.field(default_factory=list)  # (length, metric) in order
    length: int = 0  # cumulative length trained
    closed: bool = False
    exited: Optional[ExitedReason] = None


@dataclasses.dataclass
class SimulationResult:
    trials: Dict[str, SimTrial]  # in creation order
    shutdown: bool
    failure: bool
    total_length: int  # units trained by all trials together (the budget spent)
    events: int

    def best(self, smaller_is_better: bool) -> Tuple[float, str]:
        """The best metric any trial reported and that trial's request id."""
        best: Optional[Tuple[float, str]] = None
        for trial in self.trials.values():
            for _, metric in trial.validations:
                if best is None or (metric < best[0] if smaller_is_better else metric > best[0]):
                    best = (metric, trial.request_id)
        if best is None:
            raise ValueError("the simulation has no validations: no trial reported a metric")
        return best


class _Master:
    """The simulated master: trials, their queues, slots and the event loop."""

    def __init__(self, method: SearchMethod, hparams_config: Mapping[str, Any], objective: Objective, seed: int,
                 max_concurrent: int, exit_early: Optional[ExitEarly], snapshot_every_event: bool, max_events: int,
                 on_event: Optional[EventHook], capacity: Optional[int] = None) -> None:
        if max_concurrent < 0:
            raise ValueError(f"simulate: max_concurrent must be >= 0 (0 = no limit), got {max_concurrent}")
        self.template = copy.deepcopy(method) if snapshot_every_event else None
        self.seed = seed
        self.hparams_config = dict(hparams_config)
        self.capacity = capacity
        self.searcher = Searcher(method, SearchContext(seed, self.hparams_config, capacity))
        self.objective = objective
        self.max_concurrent = max_concurrent
        self.exit_early = exit_early
        self.max_events = max_events
        self.on_event = on_event

        self.trials: Dict[str, SimTrial] = {}
        self.queues: Dict[str, Deque[int]] = {}
        self.close_requested: Set[str] = set()
        self.events: Deque[Tuple[str, Dict[str, Any]]] = collections.deque()
        self.event_count = 0
        self.total_length = 0
        self.shutdown = False
        self.failure = False
        self.clock = 0
        self.running: List[Tuple[int, int, str]] = []  # heap of (finish time, start order, request id)
        self.holding: Set[str] = set()
        self.ready: List[Tuple[int, str]] = []  # heap of (creation index, request id) with queued work
        self.index: Dict[str, int] = {}
        self.started = 0

    # ---- events and operations

    def feed(self, kind: str, args: Dict[str, Any]) -> None:
        """Queue one event and process it and every event its operations cause, in order."""
        self.events.append((kind, args))
        while self.events and not self.shutdown:
            kind, args = self.events.popleft()
            if self.event_count >= self.max_events:
                raise SimulationError(
                    f"the search method did not shut down within max_events={self.max_events} events "
                    f"({len(self.trials)} trials created, {sum(t.closed for t in self.trials.values())} closed)"
                )
            self.event_count += 1
            if self.on_event is not None:
                self.on_event(kind, dict(args))
            for op in self._dispatch(kind, args):
                self._apply(op)
                if self.shutdown:
                    break
            if self.template is not None:
                self._round_trip()

    def _dispatch(self, kind: str, args: Dict[str, Any]) -> List[Operation]:
        s = self.searcher
        if kind == "initial":
            return s.initial_operations()
        if kind == "trial_created":
            return s.trial_created(args["request_id"])
        if kind == "validation_completed":
            return s.validation_completed(args["request_id"], args["metric"], args["length"])
        if kind == "trial_exited_early":
            return s.trial_exited_early(args["request_id"], args["reason"])
        return s.trial_closed(args["request_id"])

    def _round_trip(self) -> None:
        """Snapshot through JSON into a fresh method and context, as a master restart would."""
        assert self.template is not None
        data = json.loads(json.dumps(self.searcher.snapshot(), allow_nan=False))
        fresh = Searcher(copy.deepcopy(self.template), SearchContext(self.seed, self.hparams_config, self.capacity))
        fresh.restore(data)
        self.searcher = fresh

    def _trial(self, op: Operation, request_id: str) -> SimTrial:
        trial = self.trials.get(request_id)
        if trial is None:
            raise SimulationError(f"the search method's {type(op).__name__} names an unknown trial {request_id!r}")
        return trial

    def _apply(self, op: Operation) -> None:
        if isinstance(op, Create):
            self._create(op)
        elif isinstance(op, ValidateAfter):
            trial = self._trial(op, op.request_id)
            if trial.closed:
                return
            queue = self.queues[trial.request_id]
            already = queue[-1] if queue else trial.length
            if op.length < already:
                raise SimulationError(
                    f"the search method asked trial {op.request_id} to train to {op.length}, less than the "
                    f"{already} it has already trained or been asked to train to (lengths are cumulative)"
                )
            queue.append(op.length)
            if trial.request_id not in self.holding:
                heapq.heappush(self.ready, (self.index[trial.request_id], trial.request_id))
        elif isinstance(op, Close):
            trial = self._trial(op, op.request_id)
            if trial.closed:
                return
            if self.queues[trial.request_id]:
                self.close_requested.add(trial.request_id)
            else:
                self._close(trial)
        elif isinstance(op, Shutdown):
            self.shutdown = True
            self.failure = bool(op.failure)
            for trial in self.trials.values():
                trial.closed = True
                self.queues[trial.request_id].clear()
        else:
            raise SimulationError(f"the search method returned {op!r}, which is not an operation")

    def _create(self, op: Create) -> None:
        if op.request_id in self.trials:
            raise SimulationError(f"the search method created trial {op.request_id!r} twice")
        parent: Optional[str] = None
        start = 0
        if op.checkpoint is not None and "request_id" in op.checkpoint:
            parent = str(op.checkpoint["request_id"])
            if parent not in self.trials:
                raise SimulationError(f"trial {op.request_id} is created from the checkpoint of an unknown trial {parent!r}")
            start = self.trials[parent].length
            if start == 0:
                raise SimulationError(f"trial {op.request_id} is created from trial {parent}, which has no checkpoint yet")
        self.trials[op.request_id] = SimTrial(op.request_id, dict(op.hparams), parent, start, length=start)
        self.queues[op.request_id] = collections.deque()
        self.index[op.request_id] = len(self.index)
        self.events.append(("trial_created", {"request_id": op.request_id}))

    def _close(self, trial: SimTrial) -> None:
        trial.closed = True
        self.close_requested.discard(trial.request_id)
        self.events.append(("trial_closed", {"request_id": trial.request_id}))

    # ---- simulated time

    def _fill_slots(self) -> None:
        while self.ready and not (self.max_concurrent and len(self.holding) >= self.max_concurrent):
            _, request_id = heapq.heappop(self.ready)
            if self.queues[request_id] and request_id not in self.holding and not self.trials[request_id].closed:
                self.holding.add(request_id)
                self._start(request_id)

    def _start(self, request_id: str) -> None:
        trial = self.trials[request_id]
        target = self.queues[request_id][0]
        heapq.heappush(self.running, (self.clock + target - trial.length, self.started, request_id))
        self.started += 1

    def step(self) -> bool:
        """Finish the next piece of work; False when no trial has any."""
        self._fill_slots()
        if not self.running:
            return False
        finish, _, request_id = heapq.heappop(self.running)
        self.clock = finish
        trial = self.trials[request_id]
        target = self.queues[request_id].popleft()
        self.total_length += target - trial.length
        trial.length = target
        reason = self.exit_early(request_id, dict(trial.hparams), target) if self.exit_early else None
        if reason is not None:
            trial.exited = ExitedReason(reason)
            self.queues[request_id].clear()
            self.holding.discard(request_id)
            trial.closed = True
            self.close_requested.discard(request_id)
            self.events.append(("trial_exited_early", {"request_id": request_id, "reason": trial.exited.value}))
            self.feed("trial_closed", {"request_id": request_id})
            return True
        metric = float(self.objective(request_id, dict(trial.hparams), target, trial.parent))
        trial.validations.append((target, metric))
        self.feed("validation_completed", {"request_id": request_id, "metric": metric, "length": target})
        if self.shutdown:
            return True
        if self.queues[request_id] and not trial.closed:
            self._start(request_id)
            return True
        self.holding.discard(request_id)
        if request_id in self.close_requested and not trial.closed:
            trial.closed = True
            self.close_requested.discard(request_id)
            self.feed("trial_closed", {"request_id": request_id})
        return True


def simulate(
    method: SearchMethod,
    hparams_config: Mapping[str, Any],
    objective: Objective,
    *,
    seed: int = 0,
    max_concurrent: int = 0,
    exit_early: Optional[ExitEarly] = None,
    snapshot_every_event: bool = False,
    max_events: int = 1_000_000,
    on_event: Optional[EventHook] = None,
    capacity: Optional[int] = None,
) -> SimulationResult:
    """Run `method` to its Shutdown against `objective`, with no training, and return what happened.

    objective(request_id, hparams, length, parent_request_id) gives the metric a trial reports at cumulative
    `length`; `exit_early(request_id, hparams, length)` may return an ExitedReason to make the trial stop at that
    length instead of validating. With `snapshot_every_event`, the method and its SearchContext go through
    json.dumps/json.loads of their snapshot into a fresh instance after every event. `on_event(kind, args)` sees
    every event before the method does. `capacity` is the SearchContext's (trials the platform runs at once):
    given, the method creates trials as the master would let it (SearchContext.window). Raises SimulationError when the method names an unknown trial, asks for a
    length smaller than a trial already trained, stops giving work without shutting down, or exceeds max_events.
    """
    master = _Master(method, hparams_config, objective, seed, max_concurrent, exit_early, snapshot_every_event,
                     max_events, on_event, capacity)
    master.feed("initial", {})
    while not master.shutdown:
        if not master.step():
            waiting = [t.request_id for t in master.trials.values() if not t.closed]
            raise SimulationError(
                f"the search method stopped giving work without shutting down: {len(waiting)} open trials have no "
                f"queued length ({', '.join(waiting[:5])}{'...' if len(waiting) > 5 else ''})"
            )
    return SimulationResult(master.trials, master.shutdown, master.failure, master.total_length, master.event_count)
