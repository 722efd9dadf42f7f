"""Arithmetic shared by the successive-halving methods (ASHA and the synchronous brackets), exact: a float log
only estimates, exact powers of the divisor decide."""
import math
from fractions import Fraction
from typing import Any, Dict, List, Optional

from determined.config.searchers import MAX_RUNGS, MODES
from determined.searcher._context import MAX_TRIALS, SearchContext
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, Trained
from determined.searcher._ops import Create, Operation, Shutdown


def floor_log(value: int, divisor: float, limit: int = MAX_RUNGS + 1) -> int:
    """min(floor(log_divisor(value)), limit) for value >= 1, exact.

    The work is bounded by `limit`, not by the answer: a closed-form estimate from float logarithms decides at once
    when the answer reaches the limit (a divisor of 1.0000001 would otherwise take ~2*10^8 exact multiplications
    for 10^9); below it, exact powers of the divisor near the estimate correct the float's rounding (log_4(64) is
    3, not 2.9999...)."""
    if value < 1:
        raise ValueError(f"floor_log: value must be >= 1, got {value}")
    base = Fraction(divisor)
    if not base > 1:
        raise ValueError(f"floor_log: divisor must be > 1, got {divisor}")
    estimate = math.log(value) / math.log(float(divisor))  # math.log takes ints of any size
    if estimate >= limit + 1:  # the float error is far below 1: the exact answer is at least `limit`
        return limit
    count = max(0, int(estimate) - 1)
    power = base ** count
    while count > 0 and power > value:
        power /= base
        count -= 1
    while count < limit and power * base <= value:
        power *= base
        count += 1
    return count


def effective_max_rungs(max_rungs: int, max_length: int, max_trials: int, divisor: float) -> int:
    """min(max_rungs, floor(log_d(max_length))+1, floor(log_d(max_trials))+1); ValueError past MAX_RUNGS (a
    divisor close to 1 with a large max_rungs would make brackets of millions of rungs)."""
    limit = min(max_rungs, MAX_RUNGS + 1)
    rungs = min(max_rungs, floor_log(max_length, divisor, limit) + 1, floor_log(max_trials, divisor, limit) + 1)
    if rungs > MAX_RUNGS:
        raise ValueError(
            f"searcher: divisor {divisor} with max_rungs {max_rungs} makes more than {MAX_RUNGS} rungs per bracket "
            f"(max_trials {max_trials}, a length of {max_length}); lower max_rungs to at most {MAX_RUNGS} or raise "
            f"the divisor (default 4)"
        )
    return rungs


def brackets_for_mode(mode: str, max_rungs: int) -> List[int]:
    """The rungs of each bracket, most aggressive (most rungs) first."""
    if mode == "aggressive":
        return [max_rungs]
    if mode == "standard":
        return list(range(max_rungs, (max_rungs - 1) // 2, -1))
    if mode == "conservative":
        return list(range(max_rungs, 0, -1))
    raise ValueError(f"searcher.mode: unknown mode {mode!r}; use one of {', '.join(MODES)}")


def rung_lengths(num_rungs: int, max_length: int, divisor: float) -> List[int]:
    """Cumulative length of each rung: max(1, floor(max_length / divisor^(num_rungs-i-1)))."""
    if num_rungs > MAX_RUNGS:
        raise ValueError(f"searcher: {num_rungs} rungs in a bracket; at most {MAX_RUNGS}")
    base = Fraction(divisor)
    return [max(1, int(Fraction(max_length) / base ** (num_rungs - i - 1))) for i in range(num_rungs)]



class SideBySideBrackets:
    """A search that runs brackets side by side (each a search method of its own, with `max_trials`, `shutdown`,
    `snapshot()` and `restore()`): events go to the bracket that created the trial (`owner`); the search shuts down
    when every bracket has (a failed bracket shuts it down at once). Subclasses set `brackets` and `max_trials`."""

    brackets: List[Any]
    owner: Dict[str, int]
    shutdown: bool
    max_trials: int
    max_concurrent_trials: int
    bracket_rungs: List[int]
    divisor: float

    def _share_trial_limit(self) -> None:
        """Split the trials an experiment may create (MAX_TRIALS) between the brackets: each may replace INVALID_HP
        trials until it created its share."""
        spare = max(0, MAX_TRIALS - self.max_trials) // len(self.brackets)
        for bracket in self.brackets:
            bracket.max_created = bracket.max_trials + spare

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        """Each bracket's first trials; on the platform, at most the context's window in all (split between
        the brackets in proportion to their concurrency, at least one each)."""
        wanted = [min(b.concurrency, b.max_trials) for b in self.brackets]
        window = ctx.window(self.max_concurrent_trials)
        if window is not None and sum(wanted) > window:
            wanted = [max(1, w * window // sum(wanted)) for w in wanted]
        ops: List[Operation] = []
        for index, (bracket, limit) in enumerate(zip(self.brackets, wanted)):
            ops += self._own(index, bracket.initial_operations(ctx, limit))
        return ops

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int
                                ) -> List[Operation]:
        index = self._bracket_of(request_id)
        return self._own(index, self.brackets[index].on_validation_completed(ctx, request_id, metric, length))

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        index = self._bracket_of(request_id)
        return self._own(index, self.brackets[index].on_trial_exited_early(ctx, request_id, reason))

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        index = self._bracket_of(request_id)
        ops = self._own(index, self.brackets[index].on_trial_closed(ctx, request_id))
        if not self.shutdown and all(bracket.shutdown for bracket in self.brackets):
            self.shutdown = True
            ops.append(Shutdown())
        return ops

    def progress(self, trained: Trained = None) -> float:
        """The brackets' progress weighted by their trials (ASHASearch counts units trained instead)."""
        if self.shutdown:
            return 1.0
        done = sum(b.progress(trained) * b.max_trials for b in self.brackets) / float(self.max_trials)
        return min(PROGRESS_BEFORE_SHUTDOWN, done)

    def stop_facts(self, request_id: str) -> Optional[Dict[str, Any]]:
        """Why the trial's own bracket stopped it (see _reasons.py), with the bracket named; None when it did not."""
        index = self.owner.get(request_id)
        if index is None:
            return None
        facts = self.brackets[index].stop_facts(request_id)
        if facts is None:
            return None
        return {**facts, "bracket": index + 1, "brackets": len(self.brackets)}

    def _bracket_of(self, request_id: str) -> int:
        if request_id not in self.owner:
            raise ValueError(f"searcher: unknown trial request {request_id}")
        return self.owner[request_id]

    def _own(self, index: int, ops: List[Operation]) -> List[Operation]:
        out: List[Operation] = []
        for op in ops:
            if isinstance(op, Shutdown) and not op.failure:
                continue  # a bracket is done; the search is done when all are
            if isinstance(op, Shutdown):
                self.shutdown = True  # a failed bracket ends the whole search
            if isinstance(op, Create):
                self.owner[op.request_id] = index
            out.append(op)
        return out

    def snapshot(self) -> Dict[str, Any]:
        return {"brackets": [b.snapshot() for b in self.brackets], "owner": dict(self.owner), "shutdown": self.shutdown}

    def restore(self, snapshot: Dict[str, Any]) -> None:
        if len(snapshot["brackets"]) != len(self.brackets):
            raise ValueError(
                f"the searcher snapshot has {len(snapshot['brackets'])} brackets but this config makes "
                f"{len(self.brackets)}; restore a snapshot onto a search built from the same config"
            )
        for bracket, state in zip(self.brackets, snapshot["brackets"]):
            bracket.restore(state)
        self.owner = {str(k): int(v) for k, v in snapshot["owner"].items()}
        self.shutdown = bool(snapshot["shutdown"])


__all__ = ["SideBySideBrackets", "brackets_for_mode", "effective_max_rungs", "floor_log", "rung_lengths"]
