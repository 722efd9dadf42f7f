"""`async_halving` (one bracket of asynchronous successive halving) and `adaptive_asha` (brackets side by side).

Metrics are kept sign-flipped when larger is better, so a smaller stored value is always better. A trial that
exits early counts as the worst metric (`WORST_METRIC`) in the rung it was training for.
"""
import bisect
import math
import sys
from fractions import Fraction
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set

from determined.searcher._config_fields import config_int, config_length
from determined.searcher._context import MAX_TRIALS, SearchContext
from determined.searcher._halving import SideBySideBrackets, brackets_for_mode, effective_max_rungs, rung_lengths
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter

WORST_METRIC = sys.float_info.max


# ---------------------------------------------------------------- bracket arithmetic (exact, no float logs)


def trials_per_bracket(bracket_rungs: Sequence[int], max_trials: int, divisor: float) -> List[int]:
    """max_trials split in proportion to divisor^(r-1)/r, each at least 1, the remainder to the first bracket."""
    if len(bracket_rungs) > max_trials:
        raise ValueError(
            f"searcher: {len(bracket_rungs)} brackets ({list(bracket_rungs)}) need at least one trial each but "
            f"max_trials is {max_trials}; raise max_trials or use fewer bracket_rungs"
        )
    base = Fraction(divisor)
    weights = [base ** (rungs - 1) / rungs for rungs in bracket_rungs]
    total = sum(weights)
    counts = [max(1, math.floor(max_trials * w / total)) for w in weights]
    counts[0] += max_trials - sum(counts)
    if counts[0] < 1:
        raise ValueError(
            f"searcher: max_trials {max_trials} is too small for the brackets {list(bracket_rungs)}; raise max_trials"
        )
    return counts


def concurrency_per_bracket(trials: Sequence[int], max_concurrent_trials: int, divisor: float) -> List[int]:
    """How many trials each bracket runs at once.

    0 (auto): every bracket gets max(trials of the last bracket, divisor); otherwise max_concurrent_trials split
    evenly, the remainder one each to the most aggressive brackets. Each is capped by its bracket's trials and is
    at least 1 (a bracket that ran nothing would never finish).
    """
    if max_concurrent_trials == 0:
        wanted = [max(trials[-1], int(divisor))] * len(trials)
    else:
        share, extra = divmod(max_concurrent_trials, len(trials))
        wanted = [share + (1 if i < extra else 0) for i in range(len(trials))]
    return [max(1, min(w, t)) for w, t in zip(wanted, trials)]


def promotion_count(results: int, divisor: float) -> int:
    """floor(results / divisor): how many of a rung's results deserve promotion."""
    return math.floor(Fraction(results) / Fraction(divisor))


def equal_metrics_length(trials: int, lengths: Sequence[int], divisor: float) -> int:
    """Units one bracket trains when every trial reports the same metric: floor(n/divisor) move up each rung."""
    total, reached, previous = 0, trials, 0
    for length in lengths:
        total += reached * (length - previous)
        previous = length
        reached = promotion_count(reached, divisor)
    return total


def _signed(metric: float, smaller_is_better: bool) -> float:
    if math.isnan(metric):
        return WORST_METRIC
    return metric if smaller_is_better else -metric


# ---------------------------------------------------------------- one bracket


class AsyncHalvingSearch(SearchMethod):
    max_created = MAX_TRIALS  # trials it may create, INVALID_HP replacements included (SideBySideBrackets shares it)

    """One bracket of asynchronous successive halving (`async_halving`).

    Starts `max_concurrent_trials` trials (0: auto, see `concurrency_per_bracket`) in rung 0. When a trial reports
    in a rung, the top floor(m/divisor) of the m results there deserve promotion: the reporting trial is promoted
    if it is among them, else the trial at the boundary if it was not promoted yet. A promoted trial trains on to
    the next rung's length. A trial reporting in the top rung is closed. When nothing was promoted and fewer than
    `max_trials` trials exist, a new trial is created. Once all `max_trials` have reported in rung 0, the
    unpromoted trials of rungs with no outstanding work are closed. Shutdown once every trial is closed.

    With `stop_once` (Determined's early-stopping variant), a trial is decided once, when it reports: it trains on
    to the next rung when it ranks within the top max(1, floor(m/divisor)) of the m results there (itself
    included), else it is closed at once; nothing is promoted later.
    """

    def __init__(
        self,
        num_rungs: int,
        max_length: int,
        max_trials: int,
        divisor: float = 4,
        max_concurrent_trials: int = 0,
        smaller_is_better: bool = True,
        unit: str = "batches",
        stop_once: bool = False,
    ) -> None:
        _check_positive("num_rungs", num_rungs)
        _check_positive("max_length", max_length)
        _check_positive("max_trials", max_trials)
        if not divisor > 1:
            raise ValueError(f"searcher.divisor: must be > 1, got {divisor}")
        if max_concurrent_trials < 0:
            raise ValueError(f"searcher.max_concurrent_trials: must be >= 0, got {max_concurrent_trials}")
        self.num_rungs = num_rungs
        self.max_length = max_length
        self.max_trials = max_trials
        self.divisor = divisor
        self.smaller_is_better = smaller_is_better
        self.unit = unit
        self.stop_once = stop_once
        self.max_concurrent_trials = max_concurrent_trials
        self.concurrency = concurrency_per_bracket([max_trials], max_concurrent_trials, divisor)[0]
        self.rung_lengths = rung_lengths(num_rungs, max_length, divisor)
        self._reset()

    def _reset(self) -> None:
        self.trial_rung: Dict[str, int] = {}
        # per rung: [request_id, signed metric, promoted], best (smallest) first
        self.rungs: List[List[List[Any]]] = [[] for _ in range(self.num_rungs)]
        self.outstanding: Set[str] = set()
        self.outstanding_by_rung = [0] * self.num_rungs
        self.exited: Set[str] = set()
        self.invalid: Set[str] = set()  # replaced after INVALID_HP
        self.close_sent: Set[str] = set()
        self.closed: Set[str] = set()
        self.closed_out_rungs = 0
        self.shutdown = False
        # why the search closed a trial before the top rung, recorded when it did (see _reasons.py)
        self.stops: Dict[str, Dict[str, Any]] = {}
        self._decided_keep = 1  # stop_once: how many of its rung the last decided trial had to rank within

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "AsyncHalvingSearch":
        """The bracket a canonical `async_halving` searcher section describes."""
        unit, max_length = config_length(searcher_config, "max_length")
        return cls(
            num_rungs=config_int(searcher_config, "num_rungs"),
            max_length=max_length,
            max_trials=config_int(searcher_config, "max_trials"),
            divisor=float(searcher_config.get("divisor", 4)),
            max_concurrent_trials=config_int(searcher_config, "max_concurrent_trials", 0),
            smaller_is_better=bool(searcher_config.get("smaller_is_better", True)),
            unit=unit,
            stop_once=bool(searcher_config.get("stop_once", False)),
        )

    # ---- events

    def initial_operations(self, ctx: SearchContext, limit: Optional[int] = None) -> List[Operation]:
        """The bracket's first trials: its concurrency, at most `limit` (default: the context's window)."""
        if limit is None:
            limit = ctx.window(self.max_concurrent_trials)
        ops: List[Operation] = []
        for _ in range(min(self.concurrency, self.max_trials, limit if limit is not None else self.max_trials)):
            ops += self._create(ctx)
        return ops

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        self._known(request_id)
        if request_id not in self.outstanding:
            raise ValueError(f"searcher: trial {request_id} reported a validation but it has no rung in progress")
        return self._report(ctx, request_id, _signed(float(metric), self.smaller_is_better))

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        self._known(request_id)
        self.exited.add(request_id)
        replaceable = request_id not in self.invalid and len(self.trial_rung) < self.max_created
        if reason == ExitedReason.INVALID_HP and replaceable:
            return self._replace_invalid(ctx, request_id)
        if request_id in self.outstanding:
            return self._report(ctx, request_id, WORST_METRIC)
        return []

    def _replace_invalid(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        """INVALID_HP (as Determined): the trial leaves every rung and a new one replaces it, not counted."""
        self.invalid.add(request_id)
        for entries in self.rungs:
            entries[:] = [entry for entry in entries if entry[0] != request_id]
        if request_id in self.outstanding:
            self.outstanding.discard(request_id)
            self.outstanding_by_rung[self.trial_rung[request_id]] -= 1
        ops = self._create(ctx) if not self.shutdown else []
        if len(self.rungs[0]) >= self.max_trials:
            ops += self._close_out_rungs()
        return ops

    def _counted_trials(self) -> int:
        """Trials created, less those replaced after INVALID_HP."""
        return len(self.trial_rung) - len(self.invalid)

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self._known(request_id)
        ops: List[Operation] = []
        if request_id in self.outstanding:  # ended with work left and no early-exit event: it counts as worst
            self.exited.add(request_id)
            ops += self._report(ctx, request_id, WORST_METRIC)
        self.closed.add(request_id)
        if not self.shutdown and self._counted_trials() >= self.max_trials and len(self.closed) >= len(self.trial_rung):
            self.shutdown = True
            ops.append(Shutdown())
        return ops

    def planned_length(self) -> int:
        """Units the bracket plans to train: its trials and rungs when every trial is equally good."""
        return equal_metrics_length(self.max_trials, self.rung_lengths, self.divisor)

    def units_done(self, trained: Trained = None) -> float:
        """Units its trials trained: a trial training for a rung counts what it trained so far (from `trained`),
        a trial that reported in its rung, exited or closed counts the rung's whole length. Trials replaced after
        INVALID_HP count nothing."""
        done = 0.0
        for request_id, rung in self.trial_rung.items():
            if request_id in self.invalid:
                continue
            target = self.rung_lengths[rung]
            if request_id in self.outstanding and request_id not in self.closed:
                previous = self.rung_lengths[rung - 1] if rung else 0
                done += min(max((trained or {}).get(request_id, previous), previous), target)
            else:
                done += target
        return done

    def progress(self, trained: Trained = None) -> float:
        if self.shutdown:
            return 1.0
        return min(PROGRESS_BEFORE_SHUTDOWN, self.units_done(trained) / float(self.planned_length()))

    # ---- the algorithm

    def _known(self, request_id: str) -> None:
        if request_id not in self.trial_rung:
            raise ValueError(f"searcher: unknown trial request {request_id}")

    def _create(self, ctx: SearchContext) -> List[Operation]:
        request_id = ctx.new_request_id()
        self.trial_rung[request_id] = 0
        self.outstanding.add(request_id)
        self.outstanding_by_rung[0] += 1
        return [Create(request_id, ctx.sample_hparams()), ValidateAfter(request_id, self.rung_lengths[0])]

    def _report(self, ctx: SearchContext, request_id: str, value: float) -> List[Operation]:
        rung = self.trial_rung[request_id]
        self.outstanding.discard(request_id)
        self.outstanding_by_rung[rung] -= 1
        ops: List[Operation] = []
        promoted: Optional[str] = None
        if rung == self.num_rungs - 1:
            self._insert(rung, request_id, value)
            ops += self._close(request_id)
        elif self.stop_once:
            promoted = self._insert_and_decide(rung, request_id, value)
            if promoted is None:
                ops += self._close(request_id, self._stop_once_facts(rung, request_id))
        else:
            promoted = self._insert_and_promote(rung, request_id, value)
        if promoted is not None:
            self.trial_rung[promoted] = rung + 1
            self.outstanding.add(promoted)
            self.outstanding_by_rung[rung + 1] += 1
            if promoted in self.exited:  # runs the next rung as if it reported the worst metric there
                ops += self._report(ctx, promoted, WORST_METRIC)
            else:
                ops.append(ValidateAfter(promoted, self.rung_lengths[rung + 1]))
        elif self._counted_trials() < self.max_trials:
            ops += self._create(ctx)
        if len(self.rungs[0]) >= self.max_trials:
            ops += self._close_out_rungs()
        return ops

    def _insert(self, rung: int, request_id: str, value: float) -> int:
        entries = self.rungs[rung]
        index = bisect.bisect_right(entries, value, key=lambda entry: entry[1])
        entries.insert(index, [request_id, value, False])
        return index

    def _insert_and_promote(self, rung: int, request_id: str, value: float) -> Optional[str]:
        entries = self.rungs[rung]
        before = promotion_count(len(entries), self.divisor)
        index = self._insert(rung, request_id, value)
        now = promotion_count(len(entries), self.divisor)
        if index < now:
            entries[index][2] = True
            return request_id
        if now > before and not entries[before][2]:
            entries[before][2] = True
            return str(entries[before][0])
        return None

    def _insert_and_decide(self, rung: int, request_id: str, value: float) -> Optional[str]:
        """stop_once: the reporting trial goes on when it is within the top max(1, m // divisor) of the rung."""
        entries = self.rungs[rung]
        keep = max(int((len(entries) + 1) / self.divisor), 1)
        index = self._insert(rung, request_id, value)
        self._decided_keep = keep
        if index < keep:
            entries[index][2] = True
            return request_id
        return None

    def _close(self, request_id: str, facts: Optional[Dict[str, Any]] = None) -> List[Operation]:
        if request_id in self.exited or request_id in self.close_sent or request_id in self.closed:
            return []
        self.close_sent.add(request_id)
        if facts is not None:
            self.stops[request_id] = facts
        return [Close(request_id)]

    def _close_out_rungs(self) -> List[Operation]:
        ops: List[Operation] = []
        while self.closed_out_rungs < self.num_rungs and self.outstanding_by_rung[self.closed_out_rungs] == 0:
            for request_id, _, was_promoted in self.rungs[self.closed_out_rungs]:
                if not was_promoted:
                    ops += self._close(request_id, self._close_out_facts(self.closed_out_rungs, request_id))
            self.closed_out_rungs += 1
        return ops

    # ---- why a trial was stopped: facts recorded when the search closes it

    def _unsigned(self, value: float) -> Optional[float]:
        if value >= WORST_METRIC:
            return None
        return value if self.smaller_is_better else -value

    def _rung_facts(self, rung: int, request_id: str) -> Dict[str, Any]:
        entries = self.rungs[rung]
        index = next(i for i, entry in enumerate(entries) if entry[0] == request_id)
        return {"rung": rung + 1, "rungs": self.num_rungs, "length": self.rung_lengths[rung], "divisor": self.divisor,
                "reached": len(entries), "rank": index + 1, "value": self._unsigned(entries[index][1]),
                "smaller_is_better": self.smaller_is_better}

    def _close_out_facts(self, rung: int, request_id: str) -> Dict[str, Any]:
        """A trial left unpromoted in a rung no more trial will reach (every trial of the bracket is past the
        rungs below): the rung's rule, who reached it, who was promoted."""
        promoted = [self._unsigned(value) for _, value, was_promoted in self.rungs[rung] if was_promoted]
        return {**self._rung_facts(rung, request_id), "rule": "asha", "trials": self.max_trials,
                "went_on": len(promoted), "went_on_values": [v for v in promoted if v is not None]}

    def _stop_once_facts(self, rung: int, request_id: str) -> Dict[str, Any]:
        """stop_once: the rung as it stood when the trial reported and was decided."""
        keep = self._decided_keep
        facts = {**self._rung_facts(rung, request_id), "rule": "stop_once", "keep": keep}
        facts["cutoff"] = self._unsigned(self.rungs[rung][keep - 1][1]) if keep <= len(self.rungs[rung]) else None
        return facts

    def stop_facts(self, request_id: str) -> Optional[Dict[str, Any]]:
        """Why the search closed the trial before the top rung (None when it did not)."""
        return self.stops.get(request_id)

    # ---- description and state

    def describe(self) -> Dict[str, Any]:
        """The bracket as plain JSON: rungs, trials, concurrency and rung lengths (in `unit`)."""
        return {
            "rungs": self.num_rungs,
            "trials": self.max_trials,
            "concurrency": min(self.concurrency, self.max_trials),
            "rung_lengths": list(self.rung_lengths),
        }

    def snapshot(self) -> Dict[str, Any]:
        return {
            "trial_rung": dict(self.trial_rung),
            "rungs": [[list(entry) for entry in entries] for entries in self.rungs],
            "outstanding": sorted(self.outstanding),
            "exited": sorted(self.exited),
            "invalid": sorted(self.invalid),
            "close_sent": sorted(self.close_sent),
            "closed": sorted(self.closed),
            "closed_out_rungs": self.closed_out_rungs,
            "shutdown": self.shutdown,
            "stops": {k: dict(v) for k, v in self.stops.items()},
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self._reset()
        self.trial_rung = {str(k): int(v) for k, v in snapshot["trial_rung"].items()}
        self.rungs = [[[str(rid), float(value), bool(promoted)] for rid, value, promoted in entries]
                      for entries in snapshot["rungs"]]
        self.outstanding = set(snapshot["outstanding"])
        for request_id in self.outstanding:
            self.outstanding_by_rung[self.trial_rung[request_id]] += 1
        self.exited = set(snapshot["exited"])
        self.invalid = set(snapshot.get("invalid", []))
        self.close_sent = set(snapshot["close_sent"])
        self.closed = set(snapshot["closed"])
        self.closed_out_rungs = int(snapshot["closed_out_rungs"])
        self.shutdown = bool(snapshot["shutdown"])
        self.stops = {str(k): dict(v) for k, v in (snapshot.get("stops") or {}).items()}  # older snapshots: none


# ---------------------------------------------------------------- brackets side by side


def split_into_brackets(search: SideBySideBrackets, make: Callable[[int, int, int], Any]) -> None:
    """Give an ASHA search (with `bracket_rungs`, `max_trials`, `max_concurrent_trials` and `divisor`) its brackets:
    `make(rungs, max_trials, concurrency)` for each, max_trials and max_concurrent_trials split between them."""
    trials = trials_per_bracket(search.bracket_rungs, search.max_trials, search.divisor)
    concurrency = concurrency_per_bracket(trials, search.max_concurrent_trials, search.divisor)
    search.brackets = [make(rungs, n, c) for rungs, n, c in zip(search.bracket_rungs, trials, concurrency)]
    search._share_trial_limit()
    search.owner = {}
    search.shutdown = False


class ASHASearch(SideBySideBrackets, SearchMethod):
    """`adaptive_asha`: brackets of asynchronous successive halving run side by side.

    Effective max_rungs = min(max_rungs, floor(log_d(max_length))+1, floor(log_d(max_trials))+1); `mode` (or
    `bracket_rungs`) gives each bracket's rungs; max_trials and max_concurrent_trials are split between brackets
    (see `trials_per_bracket` and `concurrency_per_bracket`). Shutdown once every bracket has closed its trials.
    """

    def __init__(
        self,
        max_length: int,
        max_trials: int,
        mode: str = "standard",
        divisor: float = 4,
        max_rungs: int = 5,
        max_concurrent_trials: int = 0,
        bracket_rungs: Optional[Sequence[int]] = None,
        smaller_is_better: bool = True,
        unit: str = "batches",
        stop_once: bool = False,
    ) -> None:
        _check_positive("max_length", max_length)
        _check_positive("max_trials", max_trials)
        _check_positive("max_rungs", max_rungs)
        if not divisor > 1:
            raise ValueError(f"searcher.divisor: must be > 1, got {divisor}")
        if max_concurrent_trials < 0:
            raise ValueError(f"searcher.max_concurrent_trials: must be >= 0, got {max_concurrent_trials}")
        self.max_length = max_length
        self.max_trials = max_trials
        self.mode = mode
        self.divisor = divisor
        self.unit = unit
        self.smaller_is_better = smaller_is_better
        self.max_rungs = effective_max_rungs(max_rungs, max_length, max_trials, divisor)
        if bracket_rungs:
            for rungs in bracket_rungs:
                _check_positive("bracket_rungs", rungs)
            self.bracket_rungs = list(bracket_rungs)
        else:
            self.bracket_rungs = brackets_for_mode(mode, self.max_rungs)
        self.max_concurrent_trials = max_concurrent_trials
        split_into_brackets(self, lambda rungs, n, c: AsyncHalvingSearch(rungs, max_length, n, divisor, c,
                                                                          smaller_is_better, unit, stop_once))

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "ASHASearch":
        """The search a canonical `adaptive_asha` searcher section describes."""
        unit, max_length = config_length(searcher_config, "max_length")
        return cls(
            max_length=max_length,
            max_trials=config_int(searcher_config, "max_trials"),
            mode=str(searcher_config.get("mode") or "standard"),
            divisor=float(searcher_config.get("divisor", 4)),
            max_rungs=config_int(searcher_config, "max_rungs", 5),
            max_concurrent_trials=config_int(searcher_config, "max_concurrent_trials", 0),
            bracket_rungs=searcher_config.get("bracket_rungs"),
            smaller_is_better=bool(searcher_config.get("smaller_is_better", True)),
            unit=unit,
            stop_once=bool(searcher_config.get("stop_once", False)),
        )

    def progress(self, trained: Trained = None) -> float:
        if self.shutdown:
            return 1.0
        planned = sum(b.planned_length() for b in self.brackets)
        done = sum(b.units_done(trained) for b in self.brackets)
        return min(PROGRESS_BEFORE_SHUTDOWN, done / float(planned))

    def describe(self) -> Dict[str, Any]:
        """The brackets as plain JSON: per bracket rungs, trials, concurrency and rung lengths (in `unit`)."""
        return {"max_rungs": self.max_rungs, "brackets": [b.describe() for b in self.brackets]}


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"searcher.{name}: must be a positive int, got {value!r}")
