"""Determined 0.38's `adaptive_asha` / `async_halving` with `time_metric` and `max_time`: ASHA that stops trials.

Each trial runs its own loop and reports validation metrics that carry both `searcher.metric` and `time_metric`
(a count that grows: batches, epochs...). The search never tells a trial how long to train; it only stops the
trials that fall below a rung's cutoff (a `Close`: the master delivers the graceful preemption signal and the trial
ends COMPLETED when it exits) and creates a new trial for each one stopped, until `max_trials` were created.

Rung `i` of `n` needs `max(1, floor(max_time / divisor^(n-1-i)))` units of `time_metric`. For a report at time `t`
from a trial in rung `r`: below the rung's units it is ignored; else the metric is inserted into the rung (ties go
before equal values); in the top rung the trial is stopped (it is done); else it goes on when it ranks within the
top `max(1, floor(len(rung) / divisor))`, and the same report is tested against the next rung; otherwise it is
stopped. A missing or non-numeric metric or time is an error of the search (the experiment ends in ERROR).
Reports of a stopped trial are ignored. A trial exiting with INVALID_HP is removed from every rung and replaced
without counting toward `max_trials`; another early exit counts as the worst metric in its rung.
"""
import bisect
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from determined.searcher._asha import WORST_METRIC, split_into_brackets
from determined.searcher._config_fields import config_int
from determined.searcher._context import MAX_TRIALS, SearchContext
from determined.searcher._halving import SideBySideBrackets, brackets_for_mode, effective_max_rungs, rung_lengths
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown


def _number(metrics: Mapping[str, Any], name: str) -> Optional[float]:
    value = metrics.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        return None
    return float(value)


class StoppingBracket(SearchMethod):
    """One bracket of ASHA with stopping (`async_halving` with time_metric, or a bracket of `adaptive_asha`)."""

    max_created = MAX_TRIALS  # trials it may create, INVALID_HP replacements included (SideBySideBrackets shares it)

    def __init__(
        self,
        num_rungs: int,
        max_time: int,
        max_trials: int,
        time_metric: str,
        metric: str,
        divisor: float = 4,
        concurrency: int = 0,
        smaller_is_better: bool = True,
    ) -> None:
        for name, value in (("num_rungs", num_rungs), ("max_time", max_time), ("max_trials", max_trials)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"searcher.{name}: must be a positive int, got {value!r}")
        if not divisor > 1:
            raise ValueError(f"searcher.divisor: must be > 1, got {divisor}")
        self.num_rungs = num_rungs
        self.max_time = max_time
        self.max_trials = max_trials
        self.time_metric = time_metric
        self.metric = metric
        self.divisor = divisor
        self.smaller_is_better = smaller_is_better
        self.unit = time_metric
        self.units_needed = rung_lengths(num_rungs, max_time, divisor)
        self.concurrency = max(1, min(concurrency or max_trials, max_trials))
        self._reset()

    def _reset(self) -> None:
        self.trial_rung: Dict[str, int] = {}
        self.rungs: List[List[Tuple[str, float]]] = [[] for _ in range(self.num_rungs)]  # best (smallest) first
        self.stopped: Set[str] = set()
        self.invalid: Set[str] = set()
        self.closed: Set[str] = set()
        self.latest_time: Dict[str, float] = {}
        self.reported_progress: Dict[str, float] = {}
        self.deferred = 0  # first trials the platform's window held back: created as trials end
        self.shutdown = False
        self.stops: Dict[str, Dict[str, Any]] = {}  # why it stopped a trial, recorded when it did (_reasons.py)

    # ---- events

    def initial_operations(self, ctx: SearchContext, limit: Optional[int] = None) -> List[Operation]:
        """The bracket's first trials: its concurrency, at most `limit` now (the rest as trials end)."""
        count = self.concurrency if limit is None else max(0, min(self.concurrency, limit))
        self.deferred = self.concurrency - count
        ops: List[Operation] = []
        for _ in range(count):
            ops += self._create(ctx)
        return ops

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        raise ValueError("searcher: a time-based ASHA search gives no operations, so none can be completed")

    def on_validation_reported(self, ctx: SearchContext, request_id: str, metrics: Dict[str, Any]) -> List[Operation]:
        self._known(request_id)
        if request_id in self.stopped or request_id in self.closed or self.shutdown:
            return []
        value, time = _number(metrics, self.metric), _number(metrics, self.time_metric)
        if value is None or time is None:
            wrong = [f"{name} = {metrics.get(name)!r}" for name, got in ((self.metric, value), (self.time_metric, time))
                     if got is None]
            self.shutdown = True
            return [Shutdown(failure=True, message=(
                f"the validation metrics of a trial lack a number for {' and '.join(wrong)}: a time-based ASHA "
                f"search needs searcher.metric ({self.metric!r}) and searcher.time_metric ({self.time_metric!r}) in "
                f"every validation report; reported: {', '.join(sorted(map(str, metrics))) or 'nothing'}"))]
        self.latest_time[request_id] = max(time, self.latest_time.get(request_id, 0.0))
        signed = value if self.smaller_is_better else -value
        ops = self._early_stopping(request_id, time, signed)
        if ops and self._counted_trials() < self.max_trials:
            ops += self._create(ctx)
        return ops

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        if request_id in self.trial_rung:
            self.reported_progress[request_id] = min(1.0, max(0.0, float(progress)))
        return []

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        self._known(request_id)
        if request_id in self.stopped or request_id in self.invalid or self.shutdown:
            return []
        self.stopped.add(request_id)
        if reason == ExitedReason.INVALID_HP and len(self.trial_rung) < self.max_created:
            self.invalid.add(request_id)
            for entries in self.rungs:
                entries[:] = [entry for entry in entries if entry[0] != request_id]
            return self._create(ctx)
        self._insert(self.trial_rung[request_id], request_id, WORST_METRIC)
        return self._create(ctx) if self._counted_trials() < self.max_trials else []

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self._known(request_id)
        self.closed.add(request_id)
        self.stopped.add(request_id)
        # A trial that simply exits creates nothing (but a first trial held back by the window takes its seat): the
        # search ends when every trial it created has ended.
        if self.deferred and not self.shutdown and self._counted_trials() < self.max_trials:
            self.deferred -= 1
            return self._create(ctx)
        if not self.shutdown and len(self.closed) >= len(self.trial_rung):
            self.shutdown = True
            return [Shutdown()]
        return []

    def progress(self, trained: Trained = None) -> float:
        """The mean over max_trials of each trial's progress: 1 once stopped or ended, else the larger of its last
        `report_progress` and its latest time over max_time (trials not created yet count 0). `trained` (batches)
        is not used: the rungs are in units of the time metric."""
        if self.shutdown:
            return 1.0
        done = 0.0
        for request_id in self.trial_rung:
            if request_id in self.invalid:
                continue
            if request_id in self.stopped:
                done += 1.0
            else:
                done += max(self.reported_progress.get(request_id, 0.0),
                            min(1.0, self.latest_time.get(request_id, 0.0) / self.max_time))
        return min(PROGRESS_BEFORE_SHUTDOWN, done / self.max_trials)

    # ---- the algorithm

    def _known(self, request_id: str) -> None:
        if request_id not in self.trial_rung:
            raise ValueError(f"searcher: unknown trial request {request_id}")

    def _counted_trials(self) -> int:
        return len(self.trial_rung) - len(self.invalid)

    def _create(self, ctx: SearchContext) -> List[Operation]:
        request_id = ctx.new_request_id()
        self.trial_rung[request_id] = 0
        return [Create(request_id, ctx.sample_hparams())]

    def _insert(self, rung: int, request_id: str, value: float) -> int:
        entries = self.rungs[rung]
        index = bisect.bisect_left(entries, value, key=lambda entry: entry[1])
        entries.insert(index, (request_id, value))
        return index

    def _early_stopping(self, request_id: str, time: float, value: float) -> List[Operation]:
        for rung in range(self.trial_rung[request_id], self.num_rungs):
            self.trial_rung[request_id] = rung
            if time < self.units_needed[rung]:
                return []
            index = self._insert(rung, request_id, value)
            if rung == self.num_rungs - 1:
                self.stops[request_id] = {"rule": "top", "rung": rung + 1, "rungs": self.num_rungs,
                                          "length": self.units_needed[rung], "time": time}
                return self._stop(request_id)
            keep = max(int(len(self.rungs[rung]) / self.divisor), 1)
            if index >= keep:
                entries = self.rungs[rung]
                unsigned = [None if v >= WORST_METRIC else (v if self.smaller_is_better else -v) for _, v in entries]
                self.stops[request_id] = {
                    "rule": "stopping", "rung": rung + 1, "rungs": self.num_rungs, "length": self.units_needed[rung],
                    "time": time, "divisor": self.divisor, "reached": len(entries), "keep": keep, "rank": index + 1,
                    "value": unsigned[index], "cutoff": unsigned[keep - 1], "smaller_is_better": self.smaller_is_better}
                return self._stop(request_id)
        return []

    def stop_facts(self, request_id: str) -> Optional[Dict[str, Any]]:
        """Why the search stopped the trial (None when it did not)."""
        return self.stops.get(request_id)

    def _stop(self, request_id: str) -> List[Operation]:
        self.stopped.add(request_id)
        return [Close(request_id)]

    # ---- description and state

    def describe(self) -> Dict[str, Any]:
        """The bracket as plain JSON: rungs, trials, concurrency and the time each rung needs."""
        return {"rungs": self.num_rungs, "trials": self.max_trials, "concurrency": self.concurrency,
                "rung_lengths": list(self.units_needed)}

    def snapshot(self) -> Dict[str, Any]:
        return {
            "trial_rung": dict(self.trial_rung),
            "rungs": [[list(entry) for entry in entries] for entries in self.rungs],
            "stopped": sorted(self.stopped),
            "invalid": sorted(self.invalid),
            "closed": sorted(self.closed),
            "latest_time": dict(self.latest_time),
            "reported_progress": dict(self.reported_progress),
            "deferred": self.deferred,
            "shutdown": self.shutdown,
            "stops": {k: dict(v) for k, v in self.stops.items()},
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self._reset()
        self.trial_rung = {str(k): int(v) for k, v in snapshot["trial_rung"].items()}
        self.rungs = [[(str(rid), float(value)) for rid, value in entries] for entries in snapshot["rungs"]]
        self.stopped = set(snapshot["stopped"])
        self.invalid = set(snapshot["invalid"])
        self.closed = set(snapshot["closed"])
        self.latest_time = {str(k): float(v) for k, v in snapshot["latest_time"].items()}
        self.reported_progress = {str(k): float(v) for k, v in snapshot["reported_progress"].items()}
        self.deferred = int(snapshot.get("deferred", 0))
        self.shutdown = bool(snapshot["shutdown"])
        self.stops = {str(k): dict(v) for k, v in (snapshot.get("stops") or {}).items()}  # older snapshots: none


class ASHAStoppingSearch(SideBySideBrackets, SearchMethod):
    """0.38's `adaptive_asha`: brackets of ASHA with stopping side by side (one bracket for `async_halving`).

    The bracket arithmetic is the promotion-based search's with `max_time` for `max_length`: effective max_rungs =
    min(max_rungs, floor(log_d(max_time))+1, floor(log_d(max_trials))+1); `mode` or `bracket_rungs` give the brackets;
    max_trials and max_concurrent_trials are split between them. Shutdown once every bracket has shut down; a failed
    bracket (a report without the metrics) shuts the whole search down.
    """

    def __init__(
        self,
        bracket_rungs: Sequence[int],
        max_time: int,
        max_trials: int,
        time_metric: str,
        metric: str,
        divisor: float = 4,
        max_concurrent_trials: int = 0,
        smaller_is_better: bool = True,
    ) -> None:
        if max_concurrent_trials < 0:
            raise ValueError(f"searcher.max_concurrent_trials: must be >= 0, got {max_concurrent_trials}")
        self.max_time = max_time
        self.max_trials = max_trials
        self.max_concurrent_trials = max_concurrent_trials
        self.time_metric = time_metric
        self.divisor = divisor
        self.smaller_is_better = smaller_is_better
        self.unit = time_metric
        self.bracket_rungs = list(bracket_rungs)
        self.max_rungs = max(self.bracket_rungs)
        split_into_brackets(self, lambda rungs, n, c: StoppingBracket(rungs, max_time, n, time_metric, metric, divisor,
                                                                      c, smaller_is_better))

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "ASHAStoppingSearch":
        """The search a canonical `adaptive_asha` or `async_halving` section with time_metric and max_time describes."""
        max_time = config_int(searcher_config, "max_time")
        max_trials = config_int(searcher_config, "max_trials")
        divisor = float(searcher_config.get("divisor", 4))
        if not divisor > 1:
            raise ValueError(f"searcher.divisor: must be > 1, got {divisor}")
        for name, value in (("max_time", max_time), ("max_trials", max_trials)):
            if value <= 0:
                raise ValueError(f"searcher.{name}: must be a positive int, got {value}")
        if searcher_config.get("name") == "async_halving":
            bracket_rungs = [config_int(searcher_config, "num_rungs")]
        elif searcher_config.get("bracket_rungs"):
            bracket_rungs = sorted((int(r) for r in searcher_config["bracket_rungs"]), reverse=True)
        else:
            max_rungs = effective_max_rungs(config_int(searcher_config, "max_rungs", 5), max_time, max_trials, divisor)
            bracket_rungs = brackets_for_mode(str(searcher_config.get("mode") or "standard"), max_rungs)
        return cls(
            bracket_rungs=bracket_rungs,
            max_time=max_time,
            max_trials=max_trials,
            time_metric=str(searcher_config["time_metric"]),
            metric=str(searcher_config["metric"]),
            divisor=divisor,
            max_concurrent_trials=config_int(searcher_config, "max_concurrent_trials", 0),
            smaller_is_better=bool(searcher_config.get("smaller_is_better", True)),
        )

    def on_validation_reported(self, ctx: SearchContext, request_id: str, metrics: Dict[str, Any]) -> List[Operation]:
        index = self._bracket_of(request_id)
        return self._own(index, self.brackets[index].on_validation_reported(ctx, request_id, metrics))

    def on_trial_progress(self, ctx: SearchContext, request_id: str, progress: float) -> List[Operation]:
        index = self._bracket_of(request_id)
        return self._own(index, self.brackets[index].on_trial_progress(ctx, request_id, progress))

    def describe(self) -> Dict[str, Any]:
        """The brackets as plain JSON: per bracket rungs, trials, concurrency and the time of each rung."""
        return {"max_rungs": self.max_rungs, "brackets": [b.describe() for b in self.brackets]}
