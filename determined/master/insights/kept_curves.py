"""Learning curves kept in the database (db.TrialCurve) for the next start of the master: see curves.py.

A module of its own so that curves.py (the downsampling, which the CLI's local reads use too) imports nothing of
SQLAlchemy."""
import json
import logging
from typing import Any, Callable, Dict, List, Sequence, Tuple

from sqlalchemy import and_, delete, insert, select
from sqlalchemy.orm import Session

from determined.master.db import Trial, TrialCurve

logger = logging.getLogger("determined.master")

Rendered = Tuple[str, List[str]]  # the points as JSON text, the names of their numeric metrics


def kept_loader(s: Session, group: str, max_points: int) -> Callable[[List[int]], Dict[int, Tuple[int, Rendered]]]:
    """`load` for `CurveCache.series`: the kept curves of some trials, `{trial id: (version, (points, names))}`."""
    def load(trial_ids: List[int]) -> Dict[int, Tuple[int, Rendered]]:
        kept: Dict[int, Tuple[int, Rendered]] = {}
        for start in range(0, len(trial_ids), 500):
            query = select(TrialCurve.trial_id, TrialCurve.version, TrialCurve.points, TrialCurve.names).where(
                TrialCurve.trial_id.in_(trial_ids[start:start + 500]), TrialCurve.group_name == group,
                TrialCurve.max_points == max_points)
            for tid, version, points, names in s.execute(query):
                kept[tid] = (version, (points, json.loads(names)))
        return kept
    return load


def keep(master: Any, group: str, max_points: int, computed: Sequence[Tuple[int, int, Rendered]]) -> None:
    """Keep curves read from the trials' points for the next start, and drop those trials' out-of-date ones.

    Best effort: a curve that cannot be kept (its trial was deleted meanwhile, the database is busy) is read
    from the points again next time."""
    try:
        with master.write(wake=False) as s:
            for start in range(0, len(computed), 500):
                part = computed[start:start + 500]
                ids = [tid for tid, _, _ in part]
                current = {tid: v or 0 for tid, v in s.execute(select(Trial.id, Trial.metrics_version)
                                                               .where(Trial.id.in_(ids)))}
                s.execute(delete(TrialCurve).where(TrialCurve.trial_id.in_(ids), TrialCurve.group_name == group,
                                                   TrialCurve.max_points == max_points))
                for tid, version in current.items():  # curves of other point counts read at an older version
                    s.execute(delete(TrialCurve).where(and_(TrialCurve.trial_id == tid,
                                                            TrialCurve.version != version)))
                rows = [{"trial_id": tid, "group_name": group, "max_points": max_points, "version": version,
                         "points": points, "names": json.dumps(names)}
                        for tid, version, (points, names) in part if current.get(tid) == version]
                if rows:
                    s.execute(insert(TrialCurve), rows)
    except Exception as e:  # noqa: BLE001 - the answer was sent; only the next start's first read is slower
        logger.warning("learning curves of %s trial(s) not kept for the next start: %s", len(computed), e)
