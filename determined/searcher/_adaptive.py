"""`sync_halving`, `adaptive` and `adaptive_simple`: brackets of synchronous successive halving side by side."""
import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Union

from determined.config.errors import Problems
from determined.config.lengths import length_unit, length_value
from determined.config.searchers import SearcherSpec
from determined.searcher._context import SearchContext
from determined.searcher._halving import SideBySideBrackets, brackets_for_mode, effective_max_rungs, rung_lengths
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter

Divisor = Union[int, float]


def canonical_searcher_config(searcher_config: Mapping[str, Any], name: str) -> Dict[str, Any]:
    """The `searcher` section checked and with every default filled; raises InvalidExperimentConfig if it is bad."""
    given = searcher_config.get("name", name)
    if given != name:
        raise ValueError(f"searcher.name: expected {name!r} for this search method, got {given!r}")
    problems = Problems()
    out = SearcherSpec().check({**searcher_config, "name": name}, "searcher", problems)
    problems.raise_if_any("invalid searcher config")
    return dict(out)


def normal_divisor(divisor: Any) -> Divisor:
    """The divisor as an int when it is a whole number (exact integer arithmetic), else a float; must be > 1."""
    if isinstance(divisor, bool) or not isinstance(divisor, (int, float)) or not divisor > 1:
        raise ValueError(f"searcher.divisor: got {divisor!r}; must be a number greater than 1 (default 4)")
    return int(divisor) if float(divisor).is_integer() else float(divisor)


def div_pow(value: int, divisor: Divisor, power: int) -> int:
    """floor(value / divisor**power), exactly when the divisor is an int."""
    if isinstance(divisor, int):
        return value // divisor**power
    return math.floor(value / divisor**power)


def rung_trials(num_trials: int, divisor: Divisor, num_rungs: int) -> List[int]:
    """Trials reaching each rung when `num_trials` start: max(1, floor(num_trials / divisor^i))."""
    return [max(1, div_pow(num_trials, divisor, i)) for i in range(num_rungs)]


def halving_cost(trials: Sequence[int], lengths: Sequence[int]) -> int:
    """Units all trials of a bracket train: each trial's units in each rung counted once."""
    return sum(n * (length - previous) for n, length, previous in zip(trials, lengths, [0, *lengths[:-1]]))


def trials_for_budget(budget: int, max_length: int, divisor: Divisor, num_rungs: int) -> int:
    """The largest number of rung-0 trials whose bracket trains at most `budget` units (at least 1)."""
    lengths = rung_lengths(num_rungs, max_length, divisor)
    low, high = 1, max(1, budget // lengths[0])
    while low < high:  # the cost only grows with the number of trials: binary search
        middle = (low + high + 1) // 2
        if halving_cost(rung_trials(middle, divisor, num_rungs), lengths) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _score(metric: float, smaller_is_better: bool) -> Optional[float]:
    """The metric as a value where smaller is better; None (ranked last) when it is not a finite number."""
    if not math.isfinite(metric):
        return None
    return metric if smaller_is_better else -metric


class _Bracket:
    """One bracket of synchronous successive halving; events in, operations out (no Shutdown)."""

    def __init__(
        self,
        num_rungs: int,
        max_length: int,
        divisor: Divisor,
        smaller_is_better: bool,
        train_stragglers: bool,
        *,
        budget: Optional[int] = None,
        num_trials: Optional[int] = None,
    ) -> None:
        if num_trials is None:
            assert budget is not None
            num_trials = trials_for_budget(budget, max_length, divisor, num_rungs)
        self.lengths = rung_lengths(num_rungs, max_length, divisor)
        self.trials = rung_trials(num_trials, divisor, num_rungs)
        self.cost = halving_cost(self.trials, self.lengths)
        self.budget = self.cost if budget is None else budget
        self.divisor = divisor
        self.smaller_is_better = smaller_is_better
        self.train_stragglers = train_stragglers
        self.rung = 0
        self.members: List[List[str]] = [[] for _ in range(num_rungs)]
        self.scores: List[Dict[str, Optional[float]]] = [{} for _ in range(num_rungs)]
        self.exited: Set[str] = set()
        self.closing: Set[str] = set()
        self.closed: Set[str] = set()
        self.over = False
        self.to_create = 0  # rung-0 trials not created yet (created one per rung-0 report on the platform)
        self.stops: Dict[str, Dict[str, Any]] = {}  # why it closed a trial before the top rung (_reasons.py)

    @property
    def top(self) -> int:
        return len(self.lengths) - 1

    @property
    def finished(self) -> bool:
        """No more work will come and every trial of the bracket has closed."""
        return self.over and all(rid in self.closed for rung in self.members for rid in rung)

    def start(self, ctx: SearchContext, limit: Optional[int] = None) -> List[Operation]:
        """Create the rung-0 trials, at most `limit` now (None: all); the others as earlier ones report."""
        self.to_create = self.trials[0]
        return self._create(ctx, self.trials[0] if limit is None else limit)

    def _create(self, ctx: SearchContext, count: int) -> List[Operation]:
        ops: List[Operation] = []
        for _ in range(min(count, self.to_create)):
            request_id = ctx.new_request_id()
            self.members[0].append(request_id)
            self.to_create -= 1
            ops += [Create(request_id, ctx.sample_hparams()), *self._train(request_id, 0)]
        return ops

    def _train(self, request_id: str, rung: int) -> List[Operation]:
        ops: List[Operation] = [ValidateAfter(request_id, self.lengths[rung])]
        if rung == self.top:
            ops.append(Close(request_id))
            self.closing.add(request_id)
        return ops

    def _close(self, request_ids: Sequence[str], facts: Optional[Dict[str, Dict[str, Any]]] = None) -> List[Operation]:
        todo = [rid for rid in request_ids if rid not in self.closing and rid not in self.exited]
        self.closing.update(todo)
        for rid in todo:
            if facts is not None and rid in facts:
                self.stops[rid] = facts[rid]
        return [Close(rid) for rid in todo]

    def _rung_facts(self, ranking: Sequence[str], closed: Sequence[str], complete: bool) -> Dict[str, Dict[str, Any]]:
        """Why each of `closed` leaves the current rung: the rung's rule and where it ranked (`ranking`: the
        reported trials of the rung that can still train, best first) when the search closed it."""
        k = self.trials[self.rung + 1]
        scores = self.scores[self.rung]

        def unsigned(rid: str) -> Optional[float]:
            score = scores.get(rid)
            return None if score is None else (score if self.smaller_is_better else -score)

        common = {"rule": "sync", "rung": self.rung + 1, "rungs": len(self.lengths), "length": self.lengths[self.rung],
                  "divisor": self.divisor, "trials": len(self.members[self.rung]), "promotes": k,
                  "reported": len(ranking), "complete": complete, "smaller_is_better": self.smaller_is_better,
                  "cutoff": unsigned(ranking[k - 1]) if 0 < k <= len(ranking) else None}
        return {rid: {**common, "rank": ranking.index(rid) + 1 if rid in ranking else None, "value": unsigned(rid)}
                for rid in closed}

    def stop_facts(self, request_id: str) -> Optional[Dict[str, Any]]:
        return self.stops.get(request_id)

    def _ranking(self) -> List[str]:
        """Reported trials of the current rung that can still train, best first (ties: the earlier member)."""
        scores = self.scores[self.rung]
        order = {rid: i for i, rid in enumerate(self.members[self.rung])}
        alive = [rid for rid in scores if rid not in self.exited]
        return sorted(alive, key=lambda rid: (scores[rid] is None, scores[rid] or 0.0, order[rid]))

    def on_validation(self, ctx: SearchContext, request_id: str, metric: float) -> List[Operation]:
        return self._report(ctx, request_id, _score(metric, self.smaller_is_better))

    def on_exit(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self.exited.add(request_id)
        if self.over or request_id not in self.members[self.rung]:
            return []
        if request_id in self.scores[self.rung]:
            self.scores[self.rung][request_id] = None
            return []
        return self._report(ctx, request_id, None)

    def on_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        self.closed.add(request_id)
        unexpected = request_id not in self.scores[self.rung] or request_id not in self.closing
        if not self.over and request_id in self.members[self.rung] and unexpected and request_id not in self.exited:
            return self.on_exit(ctx, request_id)  # ended before reporting, or without our Close: an early exit
        return []

    def _report(self, ctx: SearchContext, request_id: str, score: Optional[float]) -> List[Operation]:
        if self.over or request_id not in self.members[self.rung] or request_id in self.scores[self.rung]:
            return []
        self.scores[self.rung][request_id] = score
        ops: List[Operation] = self._create(ctx, 1) if self.rung == 0 else []  # its seat goes to the next one
        if not self.train_stragglers and self.rung < self.top:
            ranking = self._ranking()
            cut = ranking[self.trials[self.rung + 1]:]
            ops += self._close(cut, self._rung_facts(ranking, cut, complete=False))
        if len(self.scores[self.rung]) == len(self.members[self.rung]) and not (self.rung == 0 and self.to_create):
            ops += self._complete_rung()
        return ops

    def _complete_rung(self) -> List[Operation]:
        if self.rung == self.top:
            self.over = True
            return []
        ranking = self._ranking()
        promoted = ranking[: self.trials[self.rung + 1]]
        left = [rid for rid in self.members[self.rung] if rid not in promoted]
        ops = self._close(left, self._rung_facts(ranking, left, complete=True))
        self.rung += 1
        self.members[self.rung] = promoted
        for request_id in promoted:
            ops += self._train(request_id, self.rung)
        if not promoted:
            self.over = True
        return ops

    def units_done(self, trained: Trained = None) -> float:
        """Units of the bracket's plan done: whole rungs, the reports of the current rung and, from `trained`,
        what the current rung's other trials trained so far in it."""
        if self.over:
            return self.cost
        previous = [0, *self.lengths[:-1]]
        done = sum(self.trials[r] * (self.lengths[r] - previous[r]) for r in range(self.rung))
        reported = min(len(self.scores[self.rung]), self.trials[self.rung])
        start, end = previous[self.rung], self.lengths[self.rung]
        partial = sum(min(max((trained or {}).get(rid, start), start), end) - start
                      for rid in self.members[self.rung] if rid not in self.scores[self.rung])
        return done + reported * (end - start) + partial

    def describe(self) -> Dict[str, Any]:
        return {
            "rungs": len(self.lengths),
            "trials": self.trials[0],
            "rung_lengths": list(self.lengths),
            "rung_trials": list(self.trials),
            "budget": self.budget,
            "total_length": self.cost,
        }

    def snapshot(self) -> Dict[str, Any]:
        return {
            "rung": self.rung,
            "members": [list(m) for m in self.members],
            "scores": [dict(s) for s in self.scores],
            "exited": sorted(self.exited),
            "closing": sorted(self.closing),
            "closed": sorted(self.closed),
            "over": self.over,
            "to_create": self.to_create,
            "stops": {k: dict(v) for k, v in self.stops.items()},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.rung = int(snapshot["rung"])
        self.members = [list(m) for m in snapshot["members"]]
        self.scores = [{k: (None if v is None else float(v)) for k, v in s.items()} for s in snapshot["scores"]]
        self.exited = set(snapshot["exited"])
        self.closing = set(snapshot["closing"])
        self.closed = set(snapshot["closed"])
        self.over = bool(snapshot["over"])
        self.to_create = int(snapshot.get("to_create", 0))  # older snapshots: every trial was created at start
        self.stops = {str(k): dict(v) for k, v in (snapshot.get("stops") or {}).items()}  # older snapshots: none


class _HalvingBrackets(SideBySideBrackets, SearchMethod):
    """Brackets side by side: events go to the bracket that created the trial; Shutdown once all are finished."""

    name = ""

    def __init__(self, brackets: List[_Bracket], max_length: int, unit: str) -> None:
        self.brackets = brackets
        self.max_length = max_length
        self.unit = unit
        self.owner: Dict[str, int] = {}
        self.shutdown = False

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        """Each bracket's rung-0 trials; on the platform at most the context's window of them in all (split in
        proportion to the brackets' rung-0 sizes, at least one each): the others as earlier ones report."""
        window = ctx.window()
        sizes = [b.trials[0] for b in self.brackets]
        limits: List[Optional[int]] = [None] * len(sizes)
        if window is not None and sum(sizes) > window:
            limits = [max(1, n * window // sum(sizes)) for n in sizes]
        ops: List[Operation] = []
        for index, (bracket, limit) in enumerate(zip(self.brackets, limits)):
            started = bracket.start(ctx, limit)
            self.owner.update({op.request_id: index for op in started if isinstance(op, Create)})
            ops += started
        return ops

    def _after(self, ops: List[Operation]) -> List[Operation]:
        if not self.shutdown and all(b.finished for b in self.brackets):
            self.shutdown = True
            ops.append(Shutdown())
        return ops

    def _event(self, request_id: str, handle: Callable[[_Bracket], List[Operation]]) -> List[Operation]:
        """Give an event to the bracket that created the trial; trials it creates in answer are its own."""
        index = self.owner.get(request_id)
        if index is None:
            return self._after([])
        ops = handle(self.brackets[index])
        self.owner.update({op.request_id: index for op in ops if isinstance(op, Create)})
        return self._after(ops)

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        return self._event(request_id, lambda b: b.on_validation(ctx, request_id, metric))

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        return self._event(request_id, lambda b: b.on_exit(ctx, request_id))

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        return self._event(request_id, lambda b: b.on_closed(ctx, request_id))

    def progress(self, trained: Trained = None) -> float:
        if self.shutdown:
            return 1.0
        planned = sum(b.cost for b in self.brackets)
        done = sum(b.units_done(trained) for b in self.brackets) / float(planned)
        return 1.0 if all(b.over for b in self.brackets) else min(PROGRESS_BEFORE_SHUTDOWN, done)

    def describe(self) -> Dict[str, Any]:
        """The brackets as plain JSON, for `det preview-search`: per bracket its number of rungs, rung-0 trials,
        rung lengths (cumulative, in `unit`), trials per rung, budget and the units its trials train in all."""
        brackets = [b.describe() for b in self.brackets]
        return {
            "name": self.name,
            "unit": self.unit,
            "max_length": self.max_length,
            "brackets": brackets,
            "trials": sum(b["trials"] for b in brackets),
            "total_length": sum(b["total_length"] for b in brackets),
        }


def _positive(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"searcher.{field}: got {value!r}; must be a positive int")
    return value


class SyncHalvingSearch(_HalvingBrackets):
    """`sync_halving`: one bracket of synchronous successive halving.

    Rung i of `num_rungs` trains to max(1, floor(max_length / divisor^(num_rungs-i-1))) units (cumulative); the
    top rung trains to max_length. The rung-0 trial count n0 is the largest whose bracket trains at most
    `budget` units, counting each trial's units in each rung once (sum of n_i * (len_i - len_{i-1}), with
    n_i = max(1, floor(n0 / divisor^i)); at least 1). Every rung-0 trial trains to rung 0; once every trial
    of a rung has reported (an early exit, or a metric that is not a finite number, ranks last; an exited
    trial is never promoted), the best n_{i+1} are promoted (ValidateAfter the next rung's length) and the
    others closed. A trial of the top rung closes after its validation. Ties go to the earlier trial.

    train_stragglers: True (the default) keeps the rung fully synchronous: a trial that will not be
    promoted is closed only when the whole rung has reported, never mid-rung. False closes a trial as soon
    as it can no longer be promoted, i.e. once n_{i+1} trials of its rung have reported better metrics, so
    its slot frees early; the set of promoted trials is the same either way.
    """

    name = "sync_halving"

    def __init__(
        self,
        num_rungs: int,
        max_length: int,
        budget: int,
        divisor: float = 4,
        train_stragglers: bool = True,
        smaller_is_better: bool = True,
        unit: str = "batches",
    ) -> None:
        _positive("num_rungs", num_rungs)
        _positive("max_length", max_length)
        if _positive("budget", budget) < max_length:
            raise ValueError(f"searcher.budget: {budget} is less than max_length ({max_length}); raise the budget")
        bracket = _Bracket(num_rungs, max_length, normal_divisor(divisor), smaller_is_better, train_stragglers,
                           budget=budget)
        super().__init__([bracket], max_length, unit)

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "SyncHalvingSearch":
        """The search a `sync_halving` searcher section describes (canonical, or raw with defaults to fill)."""
        c = canonical_searcher_config(searcher_config, cls.name)
        return cls(
            num_rungs=c["num_rungs"],
            max_length=length_value(c["max_length"]),
            budget=length_value(c["budget"]),
            divisor=c["divisor"],
            train_stragglers=c["train_stragglers"],
            smaller_is_better=c["smaller_is_better"],
            unit=length_unit(c["max_length"]),
        )


class AdaptiveSearch(_HalvingBrackets):
    """`adaptive`: brackets of synchronous successive halving side by side, sharing `budget`.

    The brackets' numbers of rungs come from `bracket_rungs` when given, else from `mode` applied to the
    effective max_rungs = min(max_rungs, floor(log_d(max_length)) + 1, floor(log_d(budget // max_length)) + 1)
    (budget // max_length, the number of full-length trials the budget pays for, stands where adaptive_asha
    has max_trials). Brackets are ordered most aggressive first; the budget is split evenly, the remainder to
    the first; each bracket is a `SyncHalvingSearch` with its share. Shutdown once every bracket is done.
    """

    name = "adaptive"

    def __init__(
        self,
        max_length: int,
        budget: int,
        mode: str = "standard",
        divisor: float = 4,
        max_rungs: int = 5,
        bracket_rungs: Optional[Sequence[int]] = None,
        train_stragglers: bool = True,
        smaller_is_better: bool = True,
        unit: str = "batches",
    ) -> None:
        _positive("max_length", max_length)
        _positive("budget", budget)
        _positive("max_rungs", max_rungs)
        d = normal_divisor(divisor)
        if bracket_rungs:
            rungs = sorted((_positive("bracket_rungs[]", r) for r in bracket_rungs), reverse=True)
        else:
            rungs = brackets_for_mode(mode, effective_max_rungs(max_rungs, max_length, budget // max_length, d))
        share, remainder = divmod(budget, len(rungs))
        if share < max_length:
            raise ValueError(
                f"searcher.budget: {budget} split over {len(rungs)} brackets gives {share} each, less than max_length "
                f"({max_length}); raise the budget to at least {len(rungs) * max_length} or use fewer brackets "
                f"(mode: aggressive, or a shorter bracket_rungs)"
            )
        brackets = [
            _Bracket(n, max_length, d, smaller_is_better, train_stragglers, budget=share + (remainder if i == 0 else 0))
            for i, n in enumerate(rungs)
        ]
        super().__init__(brackets, max_length, unit)

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "AdaptiveSearch":
        """The search an `adaptive` searcher section describes (canonical, or raw with defaults to fill)."""
        c = canonical_searcher_config(searcher_config, cls.name)
        return cls(
            max_length=length_value(c["max_length"]),
            budget=length_value(c["budget"]),
            mode=c["mode"],
            divisor=c["divisor"],
            max_rungs=c["max_rungs"],
            bracket_rungs=c["bracket_rungs"],
            train_stragglers=c["train_stragglers"],
            smaller_is_better=c["smaller_is_better"],
            unit=length_unit(c["max_length"]),
        )


class AdaptiveSimpleSearch(_HalvingBrackets):
    """`adaptive_simple`: the brackets of `adaptive` with `max_trials` split between them instead of a budget.

    Effective max_rungs = min(max_rungs, floor(log_d(max_length)) + 1, floor(log_d(max_trials)) + 1) and `mode`
    give the brackets, most aggressive first. max_trials is split evenly, one more trial for each of the
    first (max_trials mod brackets) brackets, at least 1 each; a bracket with n0 trials starts them all in
    rung 0 and its budget is what they train: sum of n_i * (len_i - len_{i-1}). Stragglers are trained.
    """

    name = "adaptive_simple"

    def __init__(
        self,
        max_length: int,
        max_trials: int,
        mode: str = "standard",
        divisor: float = 4,
        max_rungs: int = 5,
        smaller_is_better: bool = True,
        unit: str = "batches",
    ) -> None:
        _positive("max_length", max_length)
        _positive("max_trials", max_trials)
        _positive("max_rungs", max_rungs)
        d = normal_divisor(divisor)
        rungs = brackets_for_mode(mode, effective_max_rungs(max_rungs, max_length, max_trials, d))
        share, remainder = divmod(max_trials, len(rungs))
        brackets = [
            _Bracket(n, max_length, d, smaller_is_better, True, num_trials=max(1, share + (1 if i < remainder else 0)))
            for i, n in enumerate(rungs)
        ]
        super().__init__(brackets, max_length, unit)

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "AdaptiveSimpleSearch":
        """The search an `adaptive_simple` searcher section describes (canonical, or raw with defaults to fill)."""
        c = canonical_searcher_config(searcher_config, cls.name)
        return cls(
            max_length=length_value(c["max_length"]),
            max_trials=c["max_trials"],
            mode=c["mode"],
            divisor=c["divisor"],
            max_rungs=c["max_rungs"],
            smaller_is_better=c["smaller_is_better"],
            unit=length_unit(c["max_length"]),
        )
