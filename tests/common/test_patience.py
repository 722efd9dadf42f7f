"""tests/_patience.py, the waits of the suite on a busy machine: a wait goes on while what it waits on moves, its
timeout grows with the load, and it still ends when nothing moves. A fake clock: no test here sleeps."""
from typing import Any, List

import pytest

from tests import _patience


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(_patience.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(_patience.time, "sleep", fake.sleep)
    monkeypatch.setattr(_patience.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    return fake


def _load(monkeypatch: pytest.MonkeyPatch, loads: List[float]) -> None:
    """The 1-minute load average: each reading takes the next value (the last one stays)."""
    def getloadavg() -> Any:
        value = loads.pop(0) if len(loads) > 1 else loads[0]
        return (value, value, value)

    monkeypatch.setattr(_patience.os, "getloadavg", getloadavg)


def test_the_load_factor_is_the_load_per_core_at_least_one_and_capped(clock: _Clock,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _load(monkeypatch, [0.5])
    assert _patience.load_factor() == 1.0 and _patience.scaled(30) == 30
    _load(monkeypatch, [10.0])  # load 10 on 2 cores
    assert _patience.load_factor() == 5.0 and _patience.scaled(30) == 150
    _load(monkeypatch, [500.0])
    assert _patience.load_factor() == _patience.MAX_FACTOR


def test_a_wait_goes_on_while_its_progress_moves_and_ends_when_it_stops(clock: _Clock,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _load(monkeypatch, [0.0])
    started = clock.now

    def batches() -> int:  # one more batch every 5 s of the fake clock, up to 40
        return min(40, int((clock.now - started) // 5))

    # 40 batches at 5 s each: 200 s, past a 30 s timeout, and the wait still succeeds at the end.
    assert _patience.wait_for(lambda: batches() >= 40 and "done", 30, "40 batches", progress=batches) == "done"
    assert clock.now - started >= 200

    with pytest.raises(AssertionError) as failed:  # progress stops at 40 batches; the condition never comes
        _patience.wait_for(lambda: False, 30, "batch 41", progress=batches)
    message = str(failed.value)
    assert "waiting for batch 41" in message and "nothing moved for" in message and "last progress: 40" in message
    assert 200 + 30 <= clock.now - started <= 200 + 30 + 2


def test_a_busy_machine_scales_the_timeout_by_the_highest_load_seen(clock: _Clock,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _load(monkeypatch, [0.0])
    started = clock.now
    with pytest.raises(AssertionError, match=r"timeout 10 s x load factor 1.0"):
        _patience.wait_for(lambda: False, 10, "a quiet machine's wait")
    assert 10 <= clock.now - started <= 10.5

    _load(monkeypatch, [2.0, 20.0, 2.0])  # load 20 on 2 cores for a moment: factor 10 from then on
    started = clock.now
    with pytest.raises(AssertionError, match=r"timeout 10 s x load factor 10.0"):
        _patience.wait_for(lambda: False, 10, "a busy machine's wait")
    assert 100 <= clock.now - started <= 100.5
    _load(monkeypatch, [10.0])
    ready_at = clock.now + 40  # would have failed at 10 s on a quiet machine
    assert _patience.wait_for(lambda: clock.now >= ready_at, 10, "a slow step")
