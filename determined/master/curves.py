"""Learning curves of experiments with thousands of trials: downsampling that keeps the extremes, and a cache.

A curve of 10,000 reports per trial, times 1,000 trials, is too much to send to a browser or to draw: the
experiment's metrics route (api/insights.py) sends each trial's series downsampled by min/max buckets. For each
metric of a series longer than `max_points`, it keeps the first and the last point and, of the points between,
split into (max_points - 2) // 2 buckets of equal count, the point with the smallest and the one with the
largest value of each bucket. A spike or a divergence therefore stays visible however far the curve is reduced;
a point is kept whole (all its metrics) when it is an extreme of any of them. The full series of one trial stays
available (`GET /trials/{id}/metrics?group=...`).

Reading 10 million stored points for every poll of the experiment page would take far longer than the answer
may; `CurveCache` keeps each trial's downsampled series until the trial reports again (the report routes call
`touch`), so a poll reads from the database only the trials that reported since the last one.
"""
import collections
import math
import threading
import weakref
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from determined.master.problems import RequestProblem

MIN_POINTS = 4  # the first, the last, and one bucket's minimum and maximum
MAX_POINTS = 5000  # per metric of one trial's series in one answer
# Points per metric of the whole experiment answer when the request does not say: spread over its trials.
EXPERIMENT_BUDGET = 20000


def check_max_points(value: Any) -> int:
    """`max_points` of a request (an int, or its text in a query): an integer from MIN_POINTS to MAX_POINTS, or a
    400 that names the bounds."""
    number = value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 12:
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not MIN_POINTS <= number <= MAX_POINTS:
        raise RequestProblem(400, "invalid max_points", [
            f"max_points: {value!r}; expected an integer from {MIN_POINTS} to {MAX_POINTS} (points per metric of "
            "each trial's series); the full series of one trial is GET /trials/{id}/metrics?group=training"])
    return number


def default_max_points(num_trials: int) -> int:
    """Points per metric of each trial when a request does not say: EXPERIMENT_BUDGET shared by the trials."""
    return max(MIN_POINTS, min(MAX_POINTS, EXPERIMENT_BUDGET // max(1, num_trials)))


def numeric(value: Any) -> bool:
    """A finite number (not a bool): what a curve can draw."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def extreme_indices(values: Sequence[float], max_points: int) -> List[int]:
    """The indices of `values` to keep, ascending: all of them if there are at most `max_points`; otherwise the
    first, the last, and the smallest and the largest of each of (max_points - 2) // 2 buckets of equal count
    over the values between (the first of equal values)."""
    n = len(values)
    if n <= max_points:
        return list(range(n))
    buckets = (max_points - 2) // 2
    inner = n - 2
    keep = [0]
    for b in range(buckets):
        lo, hi = 1 + (b * inner) // buckets, 1 + ((b + 1) * inner) // buckets
        low = high = lo
        for i in range(lo + 1, hi):
            v = values[i]
            if v < values[low]:
                low = i
            elif v > values[high]:
                high = i
        keep.extend(sorted({low, high}))
    keep.append(n - 1)
    return keep


def downsample(metrics: Sequence[Dict[str, Any]], max_points: int) -> List[int]:
    """The indices of the points (each a dict of metric values) to keep, ascending: for each numeric metric,
    `extreme_indices` of the points that hold it; the first and the last point always. At most `max_points` per
    metric: a series of M metrics keeps at most M * max_points points (fewer where extremes coincide)."""
    n = len(metrics)
    if n <= max_points:
        return list(range(n))
    names: Set[str] = set()
    for m in metrics:
        names.update(k for k, v in m.items() if numeric(v))
    keep = {0, n - 1}
    for name in names:
        where = [i for i, m in enumerate(metrics) if numeric(m.get(name))]
        values = [float(metrics[i][name]) for i in where]
        keep.update(where[j] for j in extreme_indices(values, max_points))
    return sorted(keep)


class CurveCache:
    """Downsampled series by (trial id, group, max_points), valid while the trial has not reported since.

    `touch(trial_id)` after a report is stored; `version(trial_id)` before reading the rows; `put` keeps the
    answer under the version read, so an answer read before a report is never taken for a newer one.
    """

    def __init__(self, max_entries: int = 20000) -> None:
        self._lock = threading.Lock()
        self._versions: Dict[int, int] = {}
        self._entries: "collections.OrderedDict[Hashable, Tuple[int, Any]]" = collections.OrderedDict()
        self._max_entries = max_entries

    def touch(self, trial_id: int) -> None:
        with self._lock:
            self._versions[trial_id] = self._versions.get(trial_id, 0) + 1

    def version(self, trial_id: int) -> int:
        with self._lock:
            return self._versions.get(trial_id, 0)

    def get(self, key: Tuple[int, str, int], version: int) -> Optional[Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Tuple[int, str, int], version: int, value: Any) -> None:
        with self._lock:
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def series(self, trial_ids: Iterable[int], group: str, max_points: int,
               read: Callable[[List[int]], Dict[int, List[Any]]], render: Callable[[List[Any]], Any],
               chunk: int = 25) -> Dict[int, Any]:
        """`render(downsampled rows)` of each trial: from the cache, or `read(trial ids)` (their rows, each with a
        `metrics` dict, in order) in chunks of `chunk` trials for the ones that reported since."""
        answer: Dict[int, Any] = {}
        missing: List[Tuple[int, int]] = []
        for tid in trial_ids:
            version = self.version(tid)
            cached = self.get((tid, group, max_points), version)
            if cached is None:
                missing.append((tid, version))
            else:
                answer[tid] = cached
        for start in range(0, len(missing), chunk):
            part = missing[start:start + chunk]
            rows = read([tid for tid, _ in part])
            for tid, version in part:
                mine = rows.get(tid, [])
                value = render([mine[i] for i in downsample([r.metrics or {} for r in mine], max_points)])
                self.put((tid, group, max_points), version, value)
                answer[tid] = value
        return answer


_caches: "weakref.WeakKeyDictionary[Any, CurveCache]" = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_of(master: Any) -> CurveCache:
    """The curve cache of a master (one per master: trial ids are per database)."""
    with _caches_lock:
        cache = _caches.get(master)
        if cache is None:
            cache = _caches[master] = CurveCache()
        return cache
