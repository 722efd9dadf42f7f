"""Downsampled learning curves (determined/master/insights/curves.py): what is kept, the bound on the point count, the cache."""
import json
import math
import random
from typing import Any, Dict, List

import pytest

from determined.master.insights import curves
from determined.master.problems import RequestProblem


def _buckets(n: int, max_points: int) -> List[range]:
    """The buckets the docs promise: the n - 2 points between the first and the last, in at most
    (max_points - 2) // 2 parts of equal count (the last one may hold fewer), a count that can be maintained as
    points arrive (a multiple of a power of two)."""
    count = (max_points - 2) // 2
    width = curves.bucket_width(n - 2, count)
    assert -(-(n - 2) // width) <= count
    return [range(lo, min(lo + width, n - 1)) for lo in range(1, n - 1, width)]


@pytest.mark.parametrize("n,max_points", [(1000, 50), (1001, 51), (37, 4), (10, 10), (3, 4)])
def test_keeps_first_last_and_every_bucket_min_and_max(n: int, max_points: int) -> None:
    rng = random.Random(n)
    values = [rng.gauss(0, 1) for _ in range(n)]
    values[n // 3] = 50.0  # a spike and a dip must survive any reduction
    values[n // 2] = -50.0
    kept = curves.extreme_indices(values, max_points)
    assert kept == sorted(set(kept)) and len(kept) <= max_points
    if n <= max_points:
        assert kept == list(range(n))
        return
    assert kept[0] == 0 and kept[-1] == n - 1
    for bucket in _buckets(n, max_points):
        inside = [values[i] for i in bucket]
        assert min(inside) in [values[i] for i in kept if i in bucket]
        assert max(inside) in [values[i] for i in kept if i in bucket]
    assert values.index(50.0) in kept and values.index(-50.0) in kept


def test_points_keep_the_extremes_of_every_metric() -> None:
    n = 500
    points: List[Dict[str, Any]] = [{"loss": 1.0 / (i + 1), "lr": 0.1, "acc": math.sin(i / 7.0)} for i in range(n)]
    points[123]["loss"] = 9.0  # a spike of one metric keeps that whole point
    points[200]["lr"] = "warmup"  # not a number: not part of lr's series
    points[301] = {"note": "text only"}
    kept = curves.downsample(points, 10)
    assert kept[0] == 0 and kept[-1] == n - 1 and 123 in kept
    for name in ("loss", "lr", "acc"):
        where = [i for i, p in enumerate(points) if isinstance(p.get(name), float)]
        mine = [i for i in kept if i in where]
        values = [points[i][name] for i in where]
        assert min(values) in [points[i][name] for i in mine] and max(values) in [points[i][name] for i in mine]
    assert len(kept) <= 3 * 10  # at most max_points per metric


@pytest.mark.parametrize("value", [3, 5001, 0, -4, "many", "1e3", True, 4.5, None])
def test_the_point_count_is_bounded_with_a_clear_error(value: Any) -> None:
    with pytest.raises(RequestProblem) as e:
        curves.check_max_points(value)
    assert e.value.status == 400
    assert f"from {curves.MIN_POINTS} to {curves.MAX_POINTS}" in e.value.problems[0]
    assert "/trials/{id}/metrics" in e.value.problems[0]  # where the full series is


def test_bounds_and_default_budget() -> None:
    assert curves.check_max_points("4") == 4 and curves.check_max_points(5000) == 5000
    assert curves.default_max_points(1) == curves.MAX_POINTS
    assert curves.default_max_points(1000) == curves.EXPERIMENT_BUDGET // 1000
    assert curves.default_max_points(10**6) == curves.MIN_POINTS


class _Row:
    def __init__(self, step: int, loss: float) -> None:
        self.steps_completed, self.metrics, self.end_time = step, {"loss": loss}, None


def _steps(answer: Any) -> List[int]:
    return [p["steps_completed"] for p in json.loads(answer[0])]


def test_cache_answers_until_the_trial_reports_again() -> None:
    cache = curves.CurveCache()
    stored = {1: [_Row(s, 1.0 / s) for s in range(1, 101)], 2: [_Row(1, 0.5)]}
    reads: List[List[int]] = []
    saved: List[Any] = []

    def read(ids: List[int]) -> Dict[int, List[Any]]:
        reads.append(ids)
        return {tid: list(stored[tid]) for tid in ids}

    first = cache.series([(1, 0), (2, 0)], "training", 10, read, save=saved.extend)
    assert _steps(first[1])[0] == 1 and _steps(first[1])[-1] == 100 and len(_steps(first[1])) <= 10
    assert _steps(first[2]) == [1] and first[2][1] == ["loss"]
    assert [(tid, v) for tid, v, _ in saved] == [(1, 0), (2, 0)]  # what changed is handed on to be kept
    assert all(curves.Summary.loads(dump()).count == len(stored[tid]) for tid, _, dump in saved)
    assert cache.series([(1, 0), (2, 0)], "training", 10, read) == first and reads == [[1, 2]]
    stored[2].append(_Row(2, 0.25))
    assert _steps(cache.series([(1, 0), (2, 1)], "training", 10, read)[2]) == [1, 2]  # trial 2's new version
    assert reads == [[1, 2], [2]]  # only the trial that reported is read again
    cache.series([(1, 0)], "training", 20, read)  # another point count is another entry
    assert reads[-1] == [1]


def test_a_summary_behind_is_caught_up_from_the_points_after_it() -> None:
    cache = curves.CurveCache()
    stored = [_Row(s, 1.0 / s) for s in range(1, 101)]
    reads: List[List[int]] = []

    def read(ids: List[int]) -> Dict[int, List[Any]]:
        reads.append(ids)
        return {1: list(stored)}

    def tail(wanted: List[Any]) -> Dict[int, Any]:
        [(tid, steps)] = wanted
        return {tid: (sum(1 for r in stored if r.steps_completed < steps),
                      [r for r in stored if r.steps_completed >= steps])}

    cache.series([(1, 0)], "training", 10, read, tail=tail)
    stored.extend(_Row(s, -1.0 if s == 150 else 1.0 / s) for s in range(101, 201))
    answer = cache.series([(1, 1)], "training", 10, read, tail=tail)
    assert reads == [[1]] and 150 in _steps(answer[1]) and _steps(answer[1])[-1] == 200
    assert _steps(answer[1]) == [stored[i].steps_completed
                                 for i in curves.downsample([r.metrics for r in stored], 10)]
    stored[-1] = _Row(200, 5.0)  # the last point was replaced: not an extension, every point is read
    cache.series([(1, 2)], "training", 10, read, tail=tail)
    assert reads == [[1], [1]]


def test_kept_curves_answer_a_new_cache_when_their_version_is_current() -> None:
    stored = {1: [_Row(s, 1.0 / s) for s in range(1, 101)], 2: [_Row(1, 0.5)]}
    reads: List[List[int]] = []

    def read(ids: List[int]) -> Dict[int, List[Any]]:
        reads.append(ids)
        return {tid: list(stored[tid]) for tid in ids}

    one, two = curves.Summary(10), curves.Summary(10)
    one.extend(stored[1][:50])
    two.extend(stored[2])
    kept = {1: (3, one.dumps()), 2: (1, two.dumps()), 3: (1, '[{"an older master kept": "points"}]')}
    fresh = curves.CurveCache()  # a master that has just started
    answer = fresh.series([(1, 3), (2, 2)], "training", 10, read, load=lambda ids: kept)
    assert answer[1] == one.answer() and reads == [[2]]  # trial 2 reported since its curve was kept
    assert _steps(answer[2]) == [1]


def _per_metric(points: List[Dict[str, Any]], max_points: int) -> List[int]:
    """The definition `downsample` follows, metric by metric: the union of each numeric metric's extremes."""
    if len(points) <= max_points:
        return list(range(len(points)))
    keep = {0, len(points) - 1}
    for name in {k for p in points for k, v in p.items() if curves.numeric(v)}:
        where = [i for i, p in enumerate(points) if curves.numeric(p.get(name))]
        keep.update(where[j] for j in curves.extreme_indices([float(points[i][name]) for i in where], max_points))
    return sorted(keep)


def test_downsample_is_the_union_of_every_metrics_extremes_whatever_the_values() -> None:
    rng = random.Random(0)
    makers = [lambda: rng.gauss(0, 1), lambda: rng.randint(-5, 5), lambda: True, lambda: "text", lambda: math.nan,
              lambda: math.inf, lambda: None]
    for _ in range(200):
        n, max_points = rng.randint(0, 300), rng.randint(4, 60)
        points = [{k: rng.choice(makers)() for k in rng.sample("abcd", rng.randint(0, 4))} for _ in range(n)]
        assert curves.downsample(points, max_points) == _per_metric(points, max_points)
