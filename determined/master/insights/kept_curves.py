"""Learning curves kept in the database (db.TrialCurve) for the next start of the master: see curves.py.

A module of its own so that curves.py (the downsampling, which the CLI's local reads use too) imports nothing of
SQLAlchemy."""
import json
import logging
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from sqlalchemy import and_, delete, event, func, insert, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from determined.master.db import Trial, TrialCurve
from determined.master.insights import curves

logger = logging.getLogger("determined.master")


def kept_loader(s: Session, group: str, max_points: int) -> Callable[[List[int]], Dict[int, Tuple[int, str]]]:
    """`load` for `CurveCache.series`: the kept curves of some trials, `{trial id: (version, Summary.dumps())}`
    (a curve kept by an older master, its points only, is not loaded: it is read from the points again)."""
    def load(trial_ids: List[int]) -> Dict[int, Tuple[int, str]]:
        kept: Dict[int, Tuple[int, str]] = {}
        for start in range(0, len(trial_ids), 500):
            query = select(TrialCurve.trial_id, TrialCurve.version, TrialCurve.points, TrialCurve.names).where(
                TrialCurve.trial_id.in_(trial_ids[start:start + 500]), TrialCurve.group_name == group,
                TrialCurve.max_points == max_points)
            for tid, version, points, names in s.execute(query):
                if points.startswith("{"):
                    kept[tid] = (version, points)
        return kept
    return load


TAIL_CHUNK = 200  # trials per query of `tail_reader` (two bound parameters each)


def tail_reader(s: Session, table: Any) -> Callable[[List[Tuple[int, int]]], Dict[int, curves.Tail]]:
    """`tail` for `CurveCache.series`: for each (trial id, step), the count of the trial's points of `table` before
    that step and its points from it on, in order; two queries for up to TAIL_CHUNK trials (index ranges on
    (trial id, step)), not one per trial."""
    def tail(wanted: List[Tuple[int, int]]) -> Dict[int, curves.Tail]:
        found: Dict[int, curves.Tail] = {}
        connection = s.connection()
        for start in range(0, len(wanted), TAIL_CHUNK):
            part = wanted[start:start + TAIL_CHUNK]
            before = {tid: 0 for tid, _ in part}
            rows: Dict[int, List[Any]] = {tid: [] for tid, _ in part}
            counted = or_(*[and_(table.trial_id == tid, table.steps_completed < steps) for tid, steps in part])
            for tid, count in connection.execute(select(table.trial_id, func.count()).where(counted)
                                                 .group_by(table.trial_id)):
                before[tid] = count
            after = or_(*[and_(table.trial_id == tid, table.steps_completed >= steps) for tid, steps in part])
            for row in connection.execute(select(table.trial_id, table.steps_completed, table.end_time, table.metrics)
                                          .where(after).order_by(table.trial_id, table.steps_completed, table.id)):
                rows[row.trial_id].append(row)
            for tid, _ in part:
                found[tid] = (before[tid], rows[tid])
        return found
    return tail


class _Stored:
    """A report as the learning curves read it back from its table: its step, end time and metrics."""

    __slots__ = ("steps_completed", "end_time", "metrics")

    def __init__(self, steps_completed: int, end_time: Any, metrics: Any) -> None:
        self.steps_completed, self.end_time, self.metrics = steps_completed, end_time, metrics


def validation_stored(s: Session, trial: Trial, steps: int, metrics: Any, end_time: Any) -> None:
    """In the caller's transaction, before the trial's metrics version is increased for it: a validation of the
    trial is stored (`metrics` as stored). Once the transaction commits, it is folded into the trial's kept
    validation curves (and its training curves move to the new version as they are), so that the next read of
    the experiment's curves does not have to catch them up from the database."""
    trial_id, version = trial.id, trial.metrics_version or 0
    connection = s.connection()
    create = None
    if version == 0:  # the trial's first metrics: its curves start at its experiment's default point count
        count = connection.execute(select(func.count(Trial.id)).where(Trial.experiment_id == trial.experiment_id))
        points = curves.default_max_points(int(count.scalar() or 0))
        create = points if points <= curves.CREATE_ON_WRITE_MAX else None
    cache = curves.cache_of(connection.engine)
    point = [_Stored(steps, end_time, metrics)]
    after_commit(connection, lambda: cache.fold(trial_id, version, point, create, group="validation"))


def keep(master: Any, group: str, max_points: int,
         computed: Sequence[Tuple[int, int, Callable[[], Optional[str]]]]) -> None:
    """Keep curves (`Summary.dumps()`) that changed for the next start, and drop those trials' out-of-date ones.

    Best effort: a curve that cannot be kept (its trial was deleted meanwhile, the database is busy) is read
    from the points again next time."""
    try:
        with master.write(wake=False) as s:
            for start in range(0, len(computed), 500):
                part = [(tid, version, text) for tid, version, dump in computed[start:start + 500]
                        for text in [dump()] if text is not None]
                ids = [tid for tid, _, _ in part]
                current = {tid: v or 0 for tid, v in s.execute(select(Trial.id, Trial.metrics_version)
                                                               .where(Trial.id.in_(ids)))}
                s.execute(delete(TrialCurve).where(TrialCurve.trial_id.in_(ids), TrialCurve.group_name == group,
                                                   TrialCurve.max_points == max_points))
                for tid, version in current.items():  # curves of other point counts read at an older version
                    s.execute(delete(TrialCurve).where(and_(TrialCurve.trial_id == tid,
                                                            TrialCurve.max_points != max_points,
                                                            TrialCurve.version != version)))
                rows = [{"trial_id": tid, "group_name": group, "max_points": max_points, "version": version,
                         "points": summary, "names": json.dumps(_names(summary))}
                        for tid, version, summary in part if current.get(tid) == version]
                if rows:
                    s.execute(insert(TrialCurve), rows)
    except Exception as e:  # noqa: BLE001 - the answer was sent; only the next start's first read is slower
        logger.warning("learning curves of %s trial(s) not kept for the next start: %s", len(computed), e)


def _names(summary: str) -> List[str]:
    return list(json.loads(summary.partition("\n")[0]).get("names") or [])


def forget(connection: Connection, trial_ids: Sequence[int]) -> None:
    """In the caller's transaction: the kept curves of trials whose stored points change other than by new points
    after them (a replaced report) are dropped, so that no master folds new points into them."""
    if trial_ids:
        connection.execute(delete(TrialCurve).where(TrialCurve.trial_id.in_(sorted(set(trial_ids)))))


def after_commit(connection: Connection, action: Callable[[], None]) -> None:
    """Run `action` once the connection's transaction commits (not if it rolls back): what a commit makes true
    (new points in a trial's series) reaches the in-memory curves only then."""
    if connection not in _listening:
        _listening.add(connection)
        event.listen(connection, "commit", _committed)
        event.listen(connection, "rollback", _rolled_back)
    _pending.setdefault(connection, []).append(action)


_listening: "weakref.WeakSet[Connection]" = weakref.WeakSet()
_pending: "weakref.WeakKeyDictionary[Connection, List[Callable[[], None]]]" = weakref.WeakKeyDictionary()


def _committed(connection: Connection) -> None:
    for action in _take(connection):
        try:
            action()
        except Exception:  # noqa: BLE001 - a curve not updated here is brought up to date by its next read
            logger.exception("learning curves not updated after a commit")


def _rolled_back(connection: Connection) -> None:
    _take(connection)


def _take(connection: Connection) -> List[Callable[[], None]]:
    return _pending.pop(connection, None) or []
