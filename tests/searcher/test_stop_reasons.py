"""Why a search method stopped a trial: computed from the trial's own bracket and rung, true in every case
(issue 34: a stop reason compared a trial of bracket 1 with "the trial that went on" of bracket 2)."""
import collections
import random
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import pytest

from determined import searcher
from determined.searcher import (
    AdaptiveSearch,
    ASHASearch,
    ASHAStoppingSearch,
    AsyncHalvingSearch,
    Close,
    Create,
    SearchContext,
    Shutdown,
    ValidateAfter,
    stop_facts,
    stop_reason,
)

HP = {"x": {"type": "double", "minval": 0, "maxval": 1}}
Metric = Callable[[str, int], float]


class Run:
    """Drive a promotion-based search method: trials train their operations one at a time, oldest first."""

    def __init__(self, method: Any, metric: Metric, seed: int = 0) -> None:
        self.method, self.metric = method, metric
        self.ctx = SearchContext(seed, HP)
        self.work: Deque[Tuple[str, int]] = collections.deque()
        self.closed: List[str] = []
        self.reports: List[Tuple[str, int, float]] = []  # (request id, length, metric) in order
        self.shutdown = False
        self.to_close: set = set()
        self.apply(method.initial_operations(self.ctx))

    def apply(self, ops: List[Any]) -> None:
        for op in ops:
            if isinstance(op, ValidateAfter):
                self.work.append((op.request_id, op.length))
            elif isinstance(op, Close):
                self.to_close.add(op.request_id)
                self.close_if_done(op.request_id)
            elif isinstance(op, Shutdown):
                self.shutdown = True

    def close_if_done(self, rid: str) -> None:
        if rid in self.to_close and not any(r == rid for r, _ in self.work):
            self.to_close.discard(rid)
            self.closed.append(rid)
            self.apply(self.method.on_trial_closed(self.ctx, rid))

    def step(self) -> bool:
        if not self.work:
            return False
        rid, length = self.work.popleft()
        value = self.metric(rid, length)
        self.reports.append((rid, length, value))
        self.apply(self.method.on_validation_completed(self.ctx, rid, value, length))
        self.close_if_done(rid)
        return True

    def run(self) -> "Run":
        while self.step():
            pass
        return self

    def reason(self, rid: str, metric: str = "loss") -> Optional[str]:
        facts = stop_facts(self.method, rid)
        return None if facts is None else stop_reason(facts, metric, self.method.unit)


_NUMBERS: Dict[str, int] = {}


def num(rid: str) -> int:
    """A number for each request id, in the order they are first seen."""
    return _NUMBERS.setdefault(rid, len(_NUMBERS))


def by_order(values: List[float]) -> Metric:
    """The n-th trial created reports values[n - 1] (request ids count from 1 in creation order)."""
    ids: Dict[str, int] = {}

    def metric(rid: str, length: int) -> float:
        ids.setdefault(rid, len(ids))
        return values[ids[rid] % len(values)]

    return metric


# ---------------------------------------------------------------- adaptive_asha (promotions)


def test_a_rung_that_promoted_none_says_so_in_its_own_bracket() -> None:
    """Bracket 1 has 3 rungs (1, 4, 16 batches); its 12 trials send 3 to rung 2, which promotes 1 of every 4: none.
    Bracket 2 (2 rungs: 4, 16) has its own trials at 4 batches; the reason never mentions them."""
    metric = lambda rid, length: num(rid) * 0.01 + length * 1e-4  # noqa: E731  (a later trial is worse)
    method = ASHASearch(max_length=16, max_trials=16, divisor=4, bracket_rungs=[3, 2], max_concurrent_trials=16)
    run = Run(method, metric).run()
    assert run.shutdown
    bracket1 = [rid for rid, b in method.owner.items() if b == 0]
    at_rung2 = [rid for rid in bracket1 if method.brackets[0].trial_rung[rid] == 1]
    assert len(at_rung2) == 3
    for rid in at_rung2:
        text = run.reason(rid)
        assert text is not None
        assert text.startswith("stopped by the searcher at rung 2 of bracket 1 (4 batches): rung 2 of bracket 1 "
                               "promotes 1 of every 4 trials that reach it; 3 reached it, so it promoted none; its loss ")
        assert "of 3; no more trials will reach the rung (every trial of the bracket is past the rungs below)" in text
        bracket2_values = {f"{v:.5g}" for r, _, v in run.reports if method.owner[r] == 1}
        assert not any(v in text for v in bracket2_values)


def test_a_trial_not_promoted_among_many_names_its_rank_and_the_promoted() -> None:
    values = [0.5, 0.3, 0.9, 0.1, 0.7, 0.2, 0.8, 0.6]  # smaller is better
    method = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=8, divisor=4, max_concurrent_trials=8)
    run = Run(method, by_order(values)).run()
    first = list(method.trial_rung)[0]  # reported 0.5: 4th of 8
    text = run.reason(first)
    assert text == ("stopped by the searcher at rung 1 (2 batches): rung 1 promotes 1 of every 4 trials that reach "
                    "it; 8 reached it and 2 were promoted as results arrived (loss 0.1 to 0.2), not this trial; its "
                    "loss 0.5 ranked 4th of 8; no more trials will reach the rung (all of the bracket's trials have "
                    "reported there)")


def test_larger_is_better_ranks_the_other_way_and_shows_the_values_as_reported() -> None:
    values = [0.5, 0.3, 0.9, 0.1, 0.7, 0.2, 0.8, 0.6]
    method = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=8, divisor=4, max_concurrent_trials=8,
                                smaller_is_better=False)
    run = Run(method, by_order(values)).run()
    ids = list(method.trial_rung)
    text = run.reason(ids[0], "accuracy")
    assert text is not None and "(accuracy 0.8 to 0.9)" in text and "its accuracy 0.5 ranked 5th of 8" in text
    assert run.reason(ids[2]) is None  # 0.9: the best, promoted and trained to the top rung


def test_a_rung_that_promotes_later_when_more_trials_arrive() -> None:
    """The best of 3 at rung 1 is not promoted (floor(3/4) = 0) and not stopped: it waits; the 4th report promotes it."""
    method = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=8, divisor=4, max_concurrent_trials=4)
    run = Run(method, by_order([0.1, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]))
    best = list(method.trial_rung)[0]
    for _ in range(3):
        run.step()
    assert stop_facts(method, best) is None and method.trial_rung[best] == 0 and best not in run.closed
    run.step()  # the 4th result: rung 1 now promotes 1, the best
    assert method.trial_rung[best] == 1
    run.run()
    assert run.reason(best) is None  # trained the full length


def test_a_tie_says_who_wins_it() -> None:
    method = AsyncHalvingSearch(num_rungs=2, max_length=4, max_trials=2, divisor=2, max_concurrent_trials=2)
    run = Run(method, by_order([0.5, 0.5])).run()
    first, second = list(method.trial_rung)
    assert run.reason(first) is None
    assert run.reason(second) == (
        "stopped by the searcher at rung 1 (2 batches): rung 1 promotes 1 of every 2 trials that reach it; 2 reached "
        "it and 1 was promoted as results arrived (loss 0.5), not this trial; its loss 0.5 ranked 2nd of 2; it tied "
        "with 0.5, and on a tie the trial that reported first ranks higher; no more trials will reach the rung (all "
        "of the bracket's trials have reported there)")


def test_stop_once_decides_once_from_the_rung_as_it_stood() -> None:
    method = AsyncHalvingSearch(num_rungs=2, max_length=8, max_trials=4, divisor=2, max_concurrent_trials=4,
                                stop_once=True)
    run = Run(method, by_order([0.1, 0.5, 0.05, 0.9])).run()
    ids = list(method.trial_rung)
    assert run.reason(ids[0]) is None
    # the second: 2 results (0.1, 0.5), top max(1, floor(2/2)) = 1 goes on: 0.5 ranked 2nd
    assert run.reason(ids[1]) == (
        "stopped by the searcher at rung 1 (4 batches): rung 1 lets a trial go on when its result ranks in the top "
        "max(1, floor(n / 2)) of the n results there when it reports; 2 had reported (this one included), so the top "
        "1 went on; its loss 0.5 ranked 2nd (the 1st best: 0.1)")
    # the fourth: 4 results, the top 2 go on: 0.9 is 4th
    assert "4 had reported (this one included), so the top 2 went on; its loss 0.9 ranked 4th (the 2nd best: 0.1)" \
        in (run.reason(ids[3]) or "")


# ---------------------------------------------------------------- 0.38's ASHA that stops trials


def test_stopping_asha_names_its_bracket_rung_and_time() -> None:
    method = ASHAStoppingSearch(bracket_rungs=[2], max_time=4, max_trials=3, time_metric="batches", metric="loss",
                                divisor=2, max_concurrent_trials=2, smaller_is_better=False)
    ctx = SearchContext(0, HP)
    created = [op.request_id for op in method.initial_operations(ctx) if isinstance(op, Create)]
    a, b = created
    method.on_validation_reported(ctx, a, {"loss": 0.9, "batches": 2})
    ops = method.on_validation_reported(ctx, b, {"loss": 0.4, "batches": 2})
    assert any(isinstance(op, Close) and op.request_id == b for op in ops)
    facts = stop_facts(method, b)
    assert facts is not None
    assert stop_reason(facts, "accuracy", method.unit) == (
        "stopped by the searcher at rung 1 (2 batches): rung 1 lets a trial go on when its result ranks in the top "
        "max(1, floor(n / 2)) of the n results there when it reports; 2 had reported (this one included), so the top "
        "1 went on; its accuracy 0.4 at batches 2 ranked 2nd (the 1st best: 0.9)")
    method.on_validation_reported(ctx, a, {"loss": 0.95, "batches": 4})
    assert stop_facts(method, a)["rule"] == "top"  # type: ignore[index]


# ---------------------------------------------------------------- adaptive (synchronous brackets)


def test_adaptive_names_the_rung_rule_and_rank_in_the_trials_own_bracket() -> None:
    method = AdaptiveSearch(max_length=16, budget=160, divisor=4, bracket_rungs=[2, 1], max_rungs=2)
    run = Run(method, lambda rid, length: num(rid) * 0.01).run()
    assert run.shutdown
    stopped = [rid for rid in method.owner if stop_facts(method, rid) is not None]
    assert stopped and all(method.owner[rid] == 0 for rid in stopped)  # bracket 2 has one rung: it stops nobody
    bracket = method.brackets[0]
    k, n = bracket.trials[1], bracket.trials[0]
    for rid in stopped:
        text = run.reason(rid) or ""
        rank = sorted(bracket.members[0], key=num).index(rid) + 1
        assert text.startswith(f"stopped by the searcher at rung 1 of bracket 1 ({bracket.lengths[0]} batches): rung 1 "
                               f"of bracket 1 promotes the best {k} of its {n} trials (1 of every 4); its loss ")
        assert f"ranked {searcher._reasons.ordinal(rank)} of the {n} that reported" in text


def test_adaptive_without_stragglers_says_it_closed_before_the_rung_finished() -> None:
    method = AdaptiveSearch(max_length=16, budget=64, divisor=4, bracket_rungs=[2], train_stragglers=False)
    n = method.brackets[0].trials[0]
    run = Run(method, by_order([0.1 * (i + 1) for i in range(n)])).run()
    texts = [run.reason(rid) for rid in list(method.owner)]
    mid = [t for t in texts if t and "closed before the rung finished" in t]
    k = method.brackets[0].trials[1]
    assert mid and all(f"; {k} that reported before it ranked above its loss" in t for t in mid)


# ---------------------------------------------------------------- every case, many searches


@pytest.mark.parametrize("seed", range(12))
def test_every_stop_reason_is_true_of_its_own_bracket_and_rung(seed: int) -> None:
    rng = random.Random(seed)
    smaller = bool(seed % 2)
    divisor = rng.choice([2, 3, 4])
    kind = seed % 3
    if kind == 0:
        method: Any = ASHASearch(max_length=64, max_trials=rng.randint(5, 40), divisor=divisor, mode="conservative",
                                 smaller_is_better=smaller, max_concurrent_trials=rng.randint(0, 6))
    elif kind == 1:
        method = ASHASearch(max_length=64, max_trials=rng.randint(5, 40), divisor=divisor, mode="standard",
                            smaller_is_better=smaller, stop_once=True)
    else:
        method = AdaptiveSearch(max_length=64, budget=rng.randint(400, 2000), divisor=divisor, mode="conservative",
                                smaller_is_better=smaller)
    values: Dict[Tuple[str, int], float] = {}

    def metric(rid: str, length: int) -> float:
        return values.setdefault((rid, length), round(rng.random(), 1))  # many ties

    run = Run(method, metric).run()
    assert run.shutdown
    for rid in method.owner:
        facts = stop_facts(method, rid)
        if facts is None:
            continue
        b = method.owner[rid]
        assert facts["bracket"] == b + 1 and facts["brackets"] == len(method.brackets)
        reported = [(r, v) for r, length, v in run.reports if length == facts["length"] and method.owner[r] == b]
        assert (rid, facts["value"]) in reported  # its own value, at its own bracket's rung
        if facts["rule"] == "asha":
            assert facts["reached"] == len(reported)
            assert facts["went_on"] == sum(1 for e in method.brackets[b].rungs[facts["rung"] - 1] if e[2])
        text = stop_reason(facts, "m", "batches")
        assert f"rung {facts['rung']} of bracket {b + 1}" in text or len(method.brackets) == 1
