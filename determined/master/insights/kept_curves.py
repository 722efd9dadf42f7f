"""Learning curves kept in the database (db.TrialCurve) for the next start of the master: see curves.py.

A module of its own so that curves.py (the downsampling, which the CLI's local reads use too) imports nothing of
SQLAlchemy."""
import json
import logging
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from sqlalchemy import and_, delete, event, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from determined.master.db import Trial, TrialCurve

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
