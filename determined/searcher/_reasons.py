"""Why a search method stopped a trial, in words a researcher reads.

Each halving method (ASHA with promotions or with `stop_once`, 0.38's ASHA that stops trials, the synchronous
brackets of `adaptive`, `adaptive_simple` and `sync_halving`) and PBT record, when they close a trial before its
full length, the facts of that decision: the trial's own bracket and rung (or round), the rung's rule, how many
trials had reached it, how many went on, and where the trial ranked. `stop_facts` reads them from a method and
`stop_reason` turns them into one sentence; nothing here compares a trial with the trials of another rung or bracket.
"""
from typing import Any, Dict, Mapping, Optional, Sequence

# How each rule breaks a tie between equal metrics.
_TIES = {
    "asha": "the trial that reported first ranks higher",
    "stop_once": "the trial that reported first ranks higher",
    "stopping": "the trial that reported last ranks higher",
    "sync": "the trial created first ranks higher",
    "pbt": "the trial created first ranks higher",
}


def stop_facts(method: Any, request_id: str) -> Optional[Dict[str, Any]]:
    """The facts a search method recorded when it stopped the trial `request_id`; None when it did not stop it (or
    the method records none: random, grid, custom)."""
    read = getattr(method, "stop_facts", None)
    return read(request_id) if callable(read) else None


def ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def fmt(value: Optional[float]) -> str:
    return "none (no number: ranks last)" if value is None else f"{value:.5g}"


def _divisor(value: Any) -> str:
    return f"{float(value):g}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def where(facts: Mapping[str, Any], unit: str) -> str:
    """`rung 2 of bracket 1 (2000 batches)`, `rung 2 (2000 batches)` (one bracket) or `round 3 (300 batches)`."""
    if facts.get("rule") == "pbt":
        return f"round {facts['round']} of {facts['rounds']} ({facts['length']} {unit})"
    bracket = f" of bracket {facts['bracket']}" if int(facts.get("brackets") or 1) > 1 else ""
    return f"rung {facts['rung']}{bracket} ({facts['length']} {unit})"


def _tie(facts: Mapping[str, Any], cutoff: Optional[float], rank: Optional[int], above: int) -> str:
    value = facts.get("value")
    if value is None or cutoff is None or value != cutoff or rank is None or rank <= above:
        return ""
    return f"; it tied with {fmt(cutoff)}, and on a tie {_TIES.get(str(facts.get('rule')), 'the earlier trial ranks higher')}"


def _values(values: Sequence[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return ""
    if len(ordered) == 1:
        return fmt(ordered[0])
    return f"{fmt(ordered[0])} to {fmt(ordered[-1])}"


def stop_reason(facts: Mapping[str, Any], metric: str, unit: str) -> str:
    """One sentence: where the search stopped the trial and why, from its own bracket's and rung's facts."""
    rule = facts.get("rule")
    own = f"{metric} {fmt(facts.get('value'))}"
    if rule == "pbt":
        replaced = int(facts["replaced"])
        text = (f"replaced by the searcher at {where(facts, unit)}: each round replaces the worst "
                f"{_plural(replaced, 'member')} of the population with clones of the best; its {own} ranked "
                f"{ordinal(int(facts['rank']))} of the {facts['reported']} members that can go on")
        if facts.get("cutoff") is not None:
            text += f" (the worst member kept: {fmt(facts['cutoff'])})"
        return text + _tie(facts, facts.get("cutoff"), facts.get("rank"), int(facts["reported"]) - replaced)
    head = f"stopped by the searcher at {where(facts, unit)}: "
    rung = f"rung {facts['rung']}" + (f" of bracket {facts['bracket']}" if int(facts.get("brackets") or 1) > 1 else "")
    if rule == "asha":
        reached, went_on = int(facts["reached"]), int(facts["went_on"])
        text = f"{rung} promotes 1 of every {_divisor(facts['divisor'])} trials that reach it; {reached} reached it"
        if went_on == 0:
            text += ", so it promoted none"
        else:
            values = _values(facts.get("went_on_values") or [])
            text += (f" and {went_on} {'was' if went_on == 1 else 'were'} promoted as results arrived"
                     + (f" ({metric} {values})" if values else "") + ", not this trial")
        text += f"; its {own} ranked {ordinal(int(facts['rank']))} of {reached}"
        if went_on:
            worst = facts.get("went_on_values") or []
            cutoff = (max(worst) if facts.get("smaller_is_better", True) else min(worst)) if worst else None
            text += _tie(facts, cutoff, facts.get("rank"), 0)
        below = "all of the bracket's trials have reported there" if int(facts["rung"]) == 1 else \
            "every trial of the bracket is past the rungs below"
        return head + text + f"; no more trials will reach the rung ({below})"
    if rule in ("stop_once", "stopping"):
        keep, reached = int(facts["keep"]), int(facts["reached"])
        at = f" at {unit} {facts['time']:g}" if rule == "stopping" and isinstance(facts.get("time"), (int, float)) else ""
        text = (f"{rung} lets a trial go on when its result ranks in the top max(1, floor(n / "
                f"{_divisor(facts['divisor'])})) of the n results there when it reports; {reached} had reported "
                f"(this one included), so the top {keep} went on; its {own}{at} ranked {ordinal(int(facts['rank']))}")
        if facts.get("cutoff") is not None:
            text += f" (the {ordinal(keep)} best: {fmt(facts['cutoff'])})"
        return head + text + _tie(facts, facts.get("cutoff"), facts.get("rank"), keep)
    if rule == "sync":
        k, trials = int(facts["promotes"]), int(facts["trials"])
        text = f"{rung} promotes the best {k} of its {_plural(trials, 'trial')} (1 of every {_divisor(facts['divisor'])})"
        rank = facts.get("rank")
        if not facts.get("complete", True):
            return head + text + (f"; {k} that reported before it ranked above its {own}, so it was closed before "
                                  f"the rung finished (train_stragglers: false)") + _tie(facts, facts.get("cutoff"), rank, k)
        if rank is None:
            return head + text + f"; its {own} ranks last"
        text += f"; its {own} ranked {ordinal(int(rank))} of the {facts['reported']} that reported"
        if facts.get("cutoff") is not None:
            text += f" (the {ordinal(k)} best, the last promoted: {fmt(facts['cutoff'])})"
        return head + text + _tie(facts, facts.get("cutoff"), rank, k)
    return head.rstrip(": ")


__all__ = ["ordinal", "stop_facts", "stop_reason", "where"]
