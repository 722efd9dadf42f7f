"""Learning curves of experiments with thousands of trials: downsampling that keeps the extremes, maintained as
reports arrive.

A curve of 10,000 reports per trial, times 1,000 trials, is too much to send to a browser or to draw: the
experiment's metrics route (api/insights.py) sends each trial's series downsampled by min/max buckets. For each
metric of a series longer than `max_points`, it keeps the first and the last point and, of the points between,
cut into at most (max_points - 2) // 2 buckets of equal count (`bucket_width`: the last bucket may hold fewer),
the point with the smallest and the one with the largest value of each bucket. A spike or a divergence therefore
stays visible however far the curve is reduced; a point is kept whole (all its metrics) when it is an extreme of
any of them. The full series of one trial stays available (`GET /trials/{id}/metrics?group=...`).

The buckets' count is a multiple of a power of two, so that the downsampled curve can be maintained as points
arrive instead of being read again (`Summary`): per metric, the minimum and maximum of parts of a power-of-two
count (at most FINE parts per bucket; when there are too many, pairs merge), from which any bucket is the
minimum and maximum of its parts. Its answer is `downsample` of every point, whatever batches they came in.

Reading 10 million stored points for every poll of the experiment page would take far longer than the answer
may; `CurveCache` keeps each trial's `Summary`, in memory and in the database (db.TrialCurve, kept_curves.py),
under the trial's `metrics_version`, which every change to its metrics increases in the same transaction. The
batch store of training reports (protocol.store_training_reports) and the store of a validation
(protocol._store_validation, kept_curves.validation_stored) fold each trial's new points into its summaries of that
group once their transaction commits (its summaries of the other group move to the new version as they are); a
read brings a summary that is behind up to date from only the points stored after it (reports stored before the
master started, or through the one-report route), after checking that the stored series still begins with the
points it holds (their count, the last one), with two queries for up to 200 trials (kept_curves.tail_reader); a
trial whose stored points changed otherwise (a rollback past them, a replaced report) is read again whole.
"""
import collections
import functools
import json
import math
import threading
import weakref
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from determined.master.problems import RequestProblem

logger = logging.getLogger("determined.master")

MIN_POINTS = 4  # the first, the last, and one bucket's minimum and maximum
MAX_POINTS = 5000  # per metric of one trial's series in one answer
# A trial's curve is started as its first reports are stored when its experiment's default point count is at most
# this (curves of a few trials, with many points each, are read from their points by the first read instead).
CREATE_ON_WRITE_MAX = 1000
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


def bucket_width(inner: int, buckets: int) -> int:
    """The count of each bucket over `inner` values: a multiple `m * w` of the smallest power of two `w` that cuts
    them into at most FINE * buckets parts, `m` the fewest of those parts per bucket that make at most `buckets`.
    Buckets of these counts can be maintained as values arrive (`Summary`): when a power-of-two part is full, pairs
    of parts merge, and their minimum and maximum are the smaller and the larger of theirs."""
    fine, width = FINE * buckets, 1
    while _ceil(inner, width) > fine:
        width *= 2
    return width * _ceil(_ceil(inner, width), buckets)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


FINE = 4  # power-of-two parts kept per bucket of the answer (more: closer to `buckets` buckets, more memory)


def extreme_indices(values: Sequence[float], max_points: int) -> List[int]:
    """The indices of `values` to keep, ascending: all of them if there are at most `max_points`; otherwise the
    first, the last, and the smallest and the largest of each bucket (the first of equal values) of the values
    between, cut into at most (max_points - 2) // 2 buckets of `bucket_width` values (the last one may hold fewer)."""
    n = len(values)
    if n <= max_points:
        return list(range(n))
    width = bucket_width(n - 2, (max_points - 2) // 2)
    keep = [0]
    for lo in range(1, n - 1, width):
        hi = min(lo + width, n - 1)
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


def point_text(row: Any) -> str:
    """A point of a curve as the route sends it (JSON text): its step, its end time, its numeric metrics."""
    end = row.end_time
    return json.dumps({"steps_completed": row.steps_completed, "end_time": None if end is None else end.isoformat() + "Z",
                       "metrics": {k: v for k, v in (row.metrics or {}).items() if numeric(v)}},
                      ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _Metric:
    """One metric's series in a `Summary`: its first and last point, and the minimum and maximum of each
    power-of-two part (`width` values) of the values between, as [min, its point, max, its point]."""

    __slots__ = ("count", "first", "last", "last_value", "width", "parts")

    def __init__(self) -> None:
        self.count, self.first, self.last, self.last_value, self.width = 0, 0, 0, 0.0, 1
        self.parts: List[List[Any]] = []

    def add(self, value: float, point: int, cap: int) -> None:
        seen = self.count
        self.count += 1
        if seen == 0:
            self.first = self.last = point
            self.last_value = value
            return
        if seen >= 2:  # the previous last value is now one of those between
            v, ref, j = self.last_value, self.last, seen - 2
            parts = self.parts
            if j // self.width == len(parts):
                parts.append([v, ref, v, ref])
                if len(parts) > cap:
                    self._merge()
            else:
                part = parts[-1]
                if v < part[0]:
                    part[0], part[1] = v, ref
                elif v > part[2]:
                    part[2], part[3] = v, ref
        self.last, self.last_value = point, value

    def _merge(self) -> None:
        parts, merged = self.parts, []
        for i in range(0, len(parts), 2):
            a = parts[i]
            if i + 1 == len(parts):
                merged.append(a)
                continue
            b = parts[i + 1]
            low = a[:2] if a[0] <= b[0] else b[:2]
            high = a[2:] if a[2] >= b[2] else b[2:]
            merged.append(low + high)
        self.parts, self.width = merged, self.width * 2

    def kept(self, max_points: int, buckets: int) -> List[int]:
        """The points `extreme_indices` keeps of this series."""
        if self.count == 0:
            return []
        if self.count == 1:
            return [self.first]
        if self.count <= max_points:  # every value is a part of its own (width 1)
            return [self.first] + [p[1] for p in self.parts] + [self.last]
        keep = [self.first]
        parts, group = self.parts, _ceil(len(self.parts), buckets)
        for g in range(0, len(parts), group):
            low, high = parts[g][:2], parts[g][2:]
            for part in parts[g + 1:g + group]:
                if part[0] < low[0]:
                    low = part[:2]
                if part[2] > high[0]:
                    high = part[2:]
            keep.extend((low[1], high[1]) if low[1] <= high[1] else (high[1], low[1]))
        keep.append(self.last)
        return keep

    def refs(self) -> Iterable[int]:
        yield self.first
        yield self.last
        for part in self.parts:
            yield part[1]
            yield part[3]


class Summary:
    """A trial's series of one group, downsampled as its points arrive: `extend` with the new points (in order),
    `answer()` is what `downsample` of every point gives, however the points were cut into batches; `dumps` and
    `loads` keep it in the database (db.TrialCurve) for the next start of the master. It holds, per metric, about
    FINE * 2 * max_points points whatever the length of the series.

    `count`, `last_steps`, `at_last` (points at `last_steps`) and `last_text` (the last point's text) let a reader
    check that the stored series still begins with these points before it folds in only the ones after them."""

    def __init__(self, max_points: int, render: Callable[[Any], str] = point_text) -> None:
        self.max_points = max_points
        self.buckets = (max_points - 2) // 2
        self.cap = FINE * self.buckets
        self.render = render
        self.count = 0
        self.last_steps = -1
        self.at_last = 0
        self.version = -1
        self.saved = -1  # the version it was kept at in the database
        self.metrics: Dict[str, _Metric] = {}
        self.points: Dict[int, Any] = {}  # point -> its row, or its text once rendered
        self._answer: Optional[Tuple[str, List[str]]] = None
        self._packed: Optional[str] = None  # what `loads` has not read yet

    def extend(self, rows: Iterable[Any]) -> None:
        self._unpack()
        metrics, points, cap, isfinite = self.metrics, self.points, self.cap, math.isfinite
        for row in rows:
            point = self.count
            self.count += 1
            points[point] = row
            for name, value in (row.metrics or {}).items():
                kind = type(value)
                if kind is float:  # the same test as `downsample`
                    if not isfinite(value):
                        continue
                elif kind is not int and not numeric(value):
                    continue
                metric = metrics.get(name)
                if metric is None:
                    metric = metrics[name] = _Metric()
                metric.add(float(value), point, cap)
            steps = row.steps_completed
            if steps == self.last_steps:
                self.at_last += 1
            else:
                self.last_steps, self.at_last = steps, 1
        self._answer = None
        if len(points) > 4 * (self.cap + 2) * max(1, len(metrics)) + self.max_points + 64:
            self._prune()

    def _prune(self) -> None:
        if self.count <= self.max_points:
            return
        keep = {0, self.count - 1}
        for metric in self.metrics.values():
            keep.update(metric.refs())
        self.points = {p: v for p, v in self.points.items() if p in keep}

    def kept(self) -> List[int]:
        self._unpack()
        if self.count <= self.max_points:
            return list(range(self.count))
        keep = {0, self.count - 1}
        for metric in self.metrics.values():
            keep.update(metric.kept(self.max_points, self.buckets))
        return sorted(keep)

    def text(self, point: int) -> str:
        self._unpack()
        value = self.points[point]
        if not isinstance(value, str):
            value = self.points[point] = self.render(value)
        return value

    @property
    def last_text(self) -> Optional[str]:
        return self.text(self.count - 1) if self.count else None

    def answer(self) -> Tuple[str, List[str]]:
        """The downsampled points as JSON text, and the names of the numeric metrics of the series."""
        if self._answer is None:
            self._answer = ("[" + ",".join(self.text(p) for p in self.kept()) + "]", sorted(self.metrics))
        return self._answer

    def dumps(self) -> str:
        """A line of what a read needs (the answer, the check of the stored series), then the rest."""
        self._unpack()
        self._prune()
        text, names = self.answer()
        head = json.dumps({"format": 3, "max_points": self.max_points, "count": self.count,
                           "last_steps": self.last_steps, "at_last": self.at_last, "answer": text, "names": names},
                          separators=(",", ":"))
        body = json.dumps({"points": [[p, self.text(p)] for p in sorted(self.points)],
                           "metrics": {name: [m.count, m.first, m.last, m.last_value, m.width, m.parts]
                                       for name, m in self.metrics.items()}}, separators=(",", ":"))
        return head + "\n" + body

    @classmethod
    def loads(cls, text: str, render: Callable[[Any], str] = point_text) -> "Summary":
        """A summary kept by `dumps` (ValueError for anything else, such as a curve kept by an older master). Only
        its first line is read here: the answer; the rest when points are folded into it."""
        head_text, _, body = text.partition("\n")
        head = json.loads(head_text)
        if not isinstance(head, dict) or head.get("format") != 3 or not body:
            raise ValueError("not a kept curve summary")
        summary = cls(int(head["max_points"]), render)
        summary.count, summary.last_steps, summary.at_last = head["count"], head["last_steps"], head["at_last"]
        summary._answer = (head["answer"], list(head["names"]))
        summary._packed = body
        return summary

    def _unpack(self) -> None:
        body, self._packed = self._packed, None
        if body is None:
            return
        data = json.loads(body)
        self.points = {int(p): t for p, t in data["points"]}
        for name, (count, first, last, last_value, width, parts) in data["metrics"].items():
            metric = self.metrics[name] = _Metric()
            metric.count, metric.first, metric.last, metric.last_value = count, first, last, last_value
            metric.width, metric.parts = width, parts


Key = Tuple[int, str, int]  # (trial id, group, max_points)
GROUPS = ("training", "validation")  # the groups of the curves (the experiment's metrics route)
Tail = Tuple[int, List[Any]]  # points before the summary's last step, the points from that step on (in order)


class CurveCache:
    """Each trial's `Summary` by (trial id, group, max_points), at the trial's `metrics_version` (every change to
    its metrics increases it, in the same transaction: protocol.py).

    Training reports and validations are folded into the summaries as they are stored (`fold`, after their
    transaction commits); a reader folds in only what a trial stored since its summary (`series`: reports stored
    before the master started, ...) and reads every point of a trial only when its stored series changed otherwise (a
    rollback, a replaced report: `rewritten`). Kept in memory (the most recently read `max_entries`) and, through
    `series`'s `load` and `save`, in the database (db.TrialCurve)."""

    def __init__(self, max_entries: int = 20000) -> None:
        self._lock = threading.RLock()
        self._entries: "collections.OrderedDict[Key, Summary]" = collections.OrderedDict()
        self._by_trial: Dict[int, set] = {}
        self._floor: Dict[int, int] = {}  # trial -> the version from which older summaries cannot be caught up
        self._max_entries = max_entries

    def _put(self, key: Key, summary: Summary) -> None:
        with self._lock:
            old = self._entries.get(key)
            if old is not None and old.version > summary.version:
                return
            self._entries[key] = summary
            self._entries.move_to_end(key)
            self._by_trial.setdefault(key[0], set()).add(key)
            while len(self._entries) > self._max_entries:
                gone, _ = self._entries.popitem(last=False)
                self._by_trial.get(gone[0], set()).discard(gone)

    def fold(self, trial_id: int, version: int, rows: Sequence[Any], create_max_points: Optional[int] = None,
             group: str = "training") -> None:
        """Reports `rows` of `group` (in order, all after the trial's stored ones of that group) were committed,
        taking the trial from `version` to `version + 1`: fold them into its summaries of `group` at `version`; its
        summaries of the other groups at `version` move to `version + 1` as they are (their points did not change).
        A trial that had no metrics (`version` 0) gets summaries of `create_max_points` if it has none: `rows` in
        the one of `group`, nothing in the others."""
        with self._lock:
            keys = [k for k in self._by_trial.get(trial_id, ()) if k[1] == group]
            for key in list(self._by_trial.get(trial_id, ())):
                summary = self._entries[key]
                if summary.version != version:
                    continue  # brought up to date by its next read
                if key[1] != group:
                    summary.version = version + 1
                    continue
                # A report at or before the last step held may replace or precede stored points: read again.
                if rows and rows[0].steps_completed <= summary.last_steps:
                    self._entries.pop(key)
                    self._by_trial[trial_id].discard(key)
                    continue
                summary.extend(rows)
                summary.version = version + 1
            if version == 0 and create_max_points is not None and not keys:
                for kind in GROUPS:
                    key = (trial_id, kind, create_max_points)
                    if kind != group and key in self._entries:
                        continue
                    summary = Summary(create_max_points)
                    summary.extend(rows if kind == group else [])
                    summary.version = 1
                    self._put(key, summary)

    def rewritten(self, trial_id: int, version: int) -> None:
        """The trial's stored points change at `version` other than by new points after them: no summary of an
        earlier version may be caught up."""
        with self._lock:
            self._floor[trial_id] = max(self._floor.get(trial_id, 0), version)
            for key in self._by_trial.pop(trial_id, ()):
                self._entries.pop(key, None)

    def series(self, trials: Iterable[Tuple[int, int]], group: str, max_points: int,
               read: Callable[[List[int]], Dict[int, List[Any]]],
               tail: Optional[Callable[[List[Tuple[int, int]]], Dict[int, Tail]]] = None,
               load: Optional[Callable[[List[int]], Dict[int, Tuple[int, str]]]] = None,
               save: Optional[Callable[[List[Tuple[int, int, Callable[[], Optional[str]]]]], None]] = None,
               render: Callable[[Any], str] = point_text, chunk: int = 25) -> Dict[int, Tuple[str, List[str]]]:
        """`Summary.answer()` of each (trial id, metrics version): from memory; else from `load(trial ids)` (the
        kept `{trial id: (version, summary text)}`); a summary of an older version is brought up to date with
        `tail([(trial id, its last step)])` (the count of the trial's points before that step, and its points from
        it on) when they show that the stored series only grew; else from `read(trial ids)` (every point, in
        order) in chunks of `chunk` trials. `save([(trial id, version, its summary text when still current)])` of the
        summaries that changed since they were kept."""
        answer: Dict[int, Tuple[str, List[str]]] = {}
        behind: Dict[int, Tuple[int, Optional[Summary]]] = {}
        with self._lock:
            for tid, version in trials:
                key = (tid, group, max_points)
                summary = self._entries.get(key)
                if summary is not None and summary.version == version:
                    self._entries.move_to_end(key)
                    answer[tid] = summary.answer()
                else:
                    usable = summary is not None and self._floor.get(tid, 0) <= summary.version < version
                    behind[tid] = (version, summary if usable else None)
        if behind and load is not None:
            wanted = [tid for tid, (_, s) in behind.items() if s is None]
            for tid, (kept_version, text) in (load(wanted) if wanted else {}).items():
                if tid not in behind:
                    continue
                version = behind[tid][0]
                if kept_version > version or kept_version < self._floor.get(tid, 0):
                    continue
                try:
                    summary = Summary.loads(text, render)
                except (ValueError, KeyError, TypeError):
                    continue
                summary.version = kept_version
                behind[tid] = (version, summary)
        changed: List[Tuple[int, Summary]] = []
        loaded: List[Tuple[int, Summary]] = []
        catch_up = [(tid, s) for tid, (v, s) in behind.items() if s is not None and s.version < v]
        start_versions = {tid: s.version for tid, s in catch_up}
        for tid, (version, summary) in behind.items():
            if summary is not None and summary.version == version:
                loaded.append((tid, summary))
        tails = tail([(tid, s.last_steps) for tid, s in catch_up]) if catch_up and tail is not None else {}
        rebuild: List[int] = [tid for tid, (_, s) in behind.items() if s is None]
        for tid, summary in catch_up:
            found = tails.get(tid)
            with self._lock:  # in place, unless reports were folded into it meanwhile
                start = behind[tid][1]
                new_rows = _after(summary, found, render) if found is not None and start is summary else None
                if new_rows is None or summary.version != start_versions[tid]:
                    rebuild.append(tid)
                    continue
                summary.extend(new_rows)
                summary.version = behind[tid][0]
            changed.append((tid, summary))
        for start in range(0, len(rebuild), chunk):
            part = rebuild[start:start + chunk]
            rows = read(part)
            for tid in part:
                summary = Summary(max_points, render)
                summary.extend(rows.get(tid, []))
                summary.version = behind[tid][0]
                changed.append((tid, summary))
        for tid, summary in loaded:
            summary.saved = summary.version
        for tid, summary in loaded + changed:
            self._put((tid, group, max_points), summary)
            with self._lock:
                answer[tid] = summary.answer()
        if save is not None:
            with self._lock:  # what changed since it was kept (here, or by folding in reports as they were stored)
                unsaved = [(tid, self._entries.get((tid, group, max_points))) for tid in answer]
                unsaved = [(tid, s) for tid, s in unsaved if s is not None and s.saved != s.version]
                for tid, summary in unsaved:
                    summary.saved = summary.version
            if unsaved:
                save([(tid, s.version, functools.partial(self._dumps, s, s.version)) for tid, s in unsaved])
        return answer

    def _dumps(self, summary: Summary, version: int) -> Optional[str]:
        """The text of `summary` to keep while it is at `version` (None once it moved on: kept by a later read)."""
        with self._lock:
            return summary.dumps() if summary.version == version else None


def _after(summary: Summary, found: Tail, render: Callable[[Any], str]) -> Optional[List[Any]]:
    """The points stored after those `summary` holds, or None when the stored series no longer begins with them."""
    before, rows = found
    if summary.count == 0:
        return rows if before == 0 else None
    at_last = summary.at_last
    if before != summary.count - at_last or len(rows) < at_last:
        return None
    if any(r.steps_completed != summary.last_steps for r in rows[:at_last]):
        return None
    if render(rows[at_last - 1]) != summary.last_text:
        return None
    return rows[at_last:]


_caches: "weakref.WeakKeyDictionary[Any, CurveCache]" = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_of(master: Any) -> CurveCache:
    """The curve cache of a master's database (one per database: trial ids are per database), found from the
    master, from its engine, or from a connection's engine (what stores the reports has)."""
    engine = getattr(master, "engine", master)
    key = getattr(engine, "pool", engine)
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = CurveCache()
        return cache
