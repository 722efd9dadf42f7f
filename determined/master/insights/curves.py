"""Learning curves of experiments with thousands of trials: downsampling that keeps the extremes, and a cache.

A curve of 10,000 reports per trial, times 1,000 trials, is too much to send to a browser or to draw: the
experiment's metrics route (api/insights.py) sends each trial's series downsampled by min/max buckets. For each
metric of a series longer than `max_points`, it keeps the first and the last point and, of the points between,
split into (max_points - 2) // 2 buckets of equal count, the point with the smallest and the one with the
largest value of each bucket. A spike or a divergence therefore stays visible however far the curve is reduced;
a point is kept whole (all its metrics) when it is an extreme of any of them. The full series of one trial stays
available (`GET /trials/{id}/metrics?group=...`).

Reading 10 million stored points for every poll of the experiment page would take far longer than the answer
may; `CurveCache` keeps each trial's downsampled series, in memory and in the database (db.TrialCurve, kept_curves.py), under
the trial's `metrics_version`, which every change to its metrics increases in the same transaction: a poll, and
the first read after a master starts, read the points of only the trials that reported since their curve was kept.
"""
import collections
import math
import threading
import weakref
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from determined.master.problems import RequestProblem

logger = logging.getLogger("determined.master")

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
    # One pass over the points: each metric's (indices of the points that hold a number for it, the numbers).
    found: Dict[str, Tuple[List[int], List[float]]] = {}
    isfinite = math.isfinite
    for i, m in enumerate(metrics):
        for name, value in m.items():
            kind = type(value)
            if kind is float:  # the usual case first; the same test as `numeric`
                if not isfinite(value):
                    continue
            elif kind is not int and not numeric(value):
                continue
            entry = found.get(name)
            if entry is None:
                entry = found[name] = ([], [])
            entry[0].append(i)
            entry[1].append(float(value))
    keep = {0, n - 1}
    for where, values in found.values():
        keep.update(where[j] for j in extreme_indices(values, max_points))
    return sorted(keep)


Key = Tuple[int, str, int]  # (trial id, group, max_points)


class CurveCache:
    """Downsampled series by (trial id, group, max_points), valid while the trial's `metrics_version` is the one
    they were read at (every change to its metrics increases it, in the same transaction: protocol.py).

    Kept in memory (the most recently used `max_entries`) and, through `series`'s `load` and `save`, in the
    database (db.TrialCurve), so the first read after a master starts reads no trial's points again unless the
    trial reported since its curve was kept.
    """

    def __init__(self, max_entries: int = 20000) -> None:
        self._lock = threading.Lock()
        self._entries: "collections.OrderedDict[Key, Tuple[int, Any]]" = collections.OrderedDict()
        self._max_entries = max_entries

    def get(self, key: Key, version: int) -> Optional[Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Key, version: int, value: Any) -> None:
        with self._lock:
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def series(self, trials: Iterable[Tuple[int, int]], group: str, max_points: int,
               read: Callable[[List[int]], Dict[int, List[Any]]], render: Callable[[List[Any]], Any],
               load: Optional[Callable[[List[int]], Dict[int, Tuple[int, Any]]]] = None,
               save: Optional[Callable[[List[Tuple[int, int, Any]]], None]] = None,
               chunk: int = 25) -> Dict[int, Any]:
        """`render(downsampled rows)` of each (trial id, metrics version): from memory; else from `load(trial ids)`
        (the kept `{trial id: (version, value)}`) where the version is the trial's; else `read(trial ids)` (their
        rows, each with a `metrics` dict, in order) in chunks of `chunk` trials, and `save([(trial id, version,
        value)])` of what was read, for the next start."""
        answer: Dict[int, Any] = {}
        missing: List[Tuple[int, int]] = []
        for tid, version in trials:
            cached = self.get((tid, group, max_points), version)
            if cached is None:
                missing.append((tid, version))
            else:
                answer[tid] = cached
        if missing and load is not None:
            kept = load([tid for tid, _ in missing])
            still: List[Tuple[int, int]] = []
            for tid, version in missing:
                entry = kept.get(tid)
                if entry is not None and entry[0] == version:
                    self.put((tid, group, max_points), version, entry[1])
                    answer[tid] = entry[1]
                else:
                    still.append((tid, version))
            missing = still
        computed: List[Tuple[int, int, Any]] = []
        for start in range(0, len(missing), chunk):
            part = missing[start:start + chunk]
            rows = read([tid for tid, _ in part])
            for tid, version in part:
                mine = rows.get(tid, [])
                value = render([mine[i] for i in downsample([r.metrics or {} for r in mine], max_points)])
                self.put((tid, group, max_points), version, value)
                answer[tid] = value
                computed.append((tid, version, value))
        if computed and save is not None:
            save(computed)
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
