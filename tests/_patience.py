"""Waiting on a busy machine: a wait gives up when nothing has moved for its timeout, and that timeout grows with
the machine's load.

A timeout is written for a quiet machine. At a load of 10 on 2 cores every step takes about 5 times as long, and a
fixed wall-clock deadline fails a test that is only slow. So:

* `load_factor()`: the 1-minute load average per core, at least 1 (a quiet machine keeps the written timeouts);
* `scaled(seconds)`: a timeout scaled by it;
* `wait_for(condition, timeout, message, progress=...)`: polls `condition` until it returns something true (and
  returns that). It fails when `progress()` (what the awaited thing has done so far: a state, batches, log lines)
  has not changed for `timeout` seconds times the highest load factor seen during the wait. Without `progress`,
  the wait allows `timeout` times that factor in all.

Used by the tests' wait helpers (tests/master/_helpers.py, tests/server/_server.py, tests/e2e/_helpers.py, the UI
tests' `wait`) and by the Ray scenarios (tests/ray/_ray_scenario.py), which also run as a script outside pytest:
this module imports nothing of the tests.
"""
import os
import time
from typing import Any, Callable, Optional

# A ceiling on the factor: past it the machine is not busy but stuck, and a hang should still end.
MAX_FACTOR = 20.0
PROGRESS_EVERY_S = 1.0  # how often `progress` is sampled
_UNSET = object()


def load_factor() -> float:
    """How many times slower than a quiet machine this one is now: the 1-minute load average per core, >= 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return 1.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_FACTOR, max(1.0, load / max(1, cores)))


def scaled(seconds: float) -> float:
    """`seconds` (a timeout written for a quiet machine) times the load factor now."""
    return seconds * load_factor()


def wait_for(condition: Callable[[], Any], timeout: float, message: str, *,
             progress: Optional[Callable[[], Any]] = None, interval: float = 0.25) -> Any:
    """Poll `condition()` until it returns something true, and return it. Fail (AssertionError naming `message`)
    when nothing has moved for `timeout` x the load factor: with `progress`, the time since its value last changed;
    without it, the time since the wait began."""
    started = moved_at = time.monotonic()
    sampled_at = -PROGRESS_EVERY_S
    last: Any = _UNSET
    factor = load_factor()
    while True:
        value = condition()
        if value:
            return value
        now = time.monotonic()
        if progress is not None and now - sampled_at >= PROGRESS_EVERY_S:  # progress may cost a request or two
            seen, sampled_at = progress(), now
            if seen != last:
                last, moved_at = seen, now
        factor = max(factor, load_factor())
        if now - moved_at > timeout * factor:
            still = f"; nothing moved for {now - moved_at:.0f} s (last progress: {last!r})" if progress else ""
            raise AssertionError(f"timed out after {now - started:.0f} s waiting for {message} (timeout {timeout:g} s "
                                 f"x load factor {factor:.1f}{still})")
        time.sleep(interval)
