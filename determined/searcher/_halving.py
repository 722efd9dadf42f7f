"""Arithmetic shared by the successive-halving methods (ASHA and the synchronous brackets), exact: no float logs."""
from fractions import Fraction
from typing import Any, Dict, List

from determined.config.searchers import MODES


def floor_log(value: int, divisor: float) -> int:
    """floor(log_divisor(value)) for value >= 1, counted with exact arithmetic."""
    if value < 1:
        raise ValueError(f"floor_log: value must be >= 1, got {value}")
    base = Fraction(divisor)
    power, count = base, 0
    while power <= value:
        power *= base
        count += 1
    return count


def effective_max_rungs(max_rungs: int, max_length: int, max_trials: int, divisor: float) -> int:
    """min(max_rungs, floor(log_d(max_length))+1, floor(log_d(max_trials))+1)."""
    return min(max_rungs, floor_log(max_length, divisor) + 1, floor_log(max_trials, divisor) + 1)


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
    base = Fraction(divisor)
    return [max(1, int(Fraction(max_length) / base ** (num_rungs - i - 1))) for i in range(num_rungs)]



class SideBySideBrackets:
    """The state of a search that runs brackets side by side: the brackets (each with its own `snapshot()` and
    `restore()`), the bracket that created each trial (`owner`), and whether the search has shut down."""

    brackets: List[Any]
    owner: Dict[str, int]
    shutdown: bool

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
