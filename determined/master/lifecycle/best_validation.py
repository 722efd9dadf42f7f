"""The stored best validation of an experiment and of its trials, in the one order of "best".

`experiments.best_validation` / `best_trial_id` and `trials.best_validation` follow
`determined.common.checkpoint_order.validation_key`, the order GC, the SDK, the run's summary and the UI use: the
searcher metric in its direction, then more batches, then the lower trial id. As for a checkpoint, the last
validation a trial reported at a given number of batches is the one that counts (a restarted run may report the
same batches again). The order is computed here from the rows, never from the order the database returns them in,
so SQLite and PostgreSQL store the same best.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.common.checkpoint_order import ValidationKey, metric_value, validation_key
from determined.master.db import Experiment, Trial, ValidationMetrics


def _searcher(exp: Experiment) -> Tuple[str, bool]:
    searcher = exp.config["searcher"]
    return str(searcher["metric"]), bool(searcher.get("smaller_is_better", True))


def _last_at_each_steps(rows: Sequence[ValidationMetrics], metric: str) -> Dict[int, Any]:
    """{steps: the metric's value in the last report at those steps}; rows in any order (the id tells which is last)."""
    last: Dict[int, Tuple[int, Any]] = {}
    for row in rows:
        steps = int(row.steps_completed or 0)
        if steps not in last or row.id > last[steps][0]:
            last[steps] = (row.id, (row.metrics or {}).get(metric))
    return {steps: value for steps, (_, value) in last.items()}


def _trial_best(s: Session, trial_id: int, metric: str, smaller: bool) -> Optional[ValidationKey]:
    rows = list(s.scalars(select(ValidationMetrics).where(ValidationMetrics.trial_id == trial_id)))
    keys = [validation_key(v, smaller, steps, trial_id) for steps, v in _last_at_each_steps(rows, metric).items()
            if metric_value(v) is not None]
    return min(keys) if keys else None


def _value(key: ValidationKey, smaller: bool) -> float:
    return key[1] if smaller else -key[1]


def recompute_best(s: Session, exp: Experiment) -> Optional[ValidationKey]:
    """Recompute the best validations of the experiment and its trials from the stored rows; the best's key."""
    metric, smaller = _searcher(exp)
    s.flush()
    best: Optional[ValidationKey] = None
    for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp.id)):
        rows: List[ValidationMetrics] = sorted(
            s.scalars(select(ValidationMetrics).where(ValidationMetrics.trial_id == trial.id)),
            key=lambda r: (r.steps_completed, r.id))
        trial.latest_validation = rows[-1].metrics if rows else None
        keys = [validation_key(v, smaller, steps, trial.id) for steps, v in _last_at_each_steps(rows, metric).items()
                if metric_value(v) is not None]
        mine = min(keys) if keys else None
        trial.best_validation = _value(mine, smaller) if mine is not None else None
        if mine is not None and (best is None or mine < best):
            best = mine
    exp.best_validation = _value(best, smaller) if best is not None else None
    exp.best_trial_id = best[3] if best is not None else None
    return best


def record_best(s: Session, exp: Experiment, trial: Trial, steps: int, value: float) -> bool:
    """After the validation (trial, steps, value) was stored: update the stored bests; whether it is now the
    experiment's best validation.

    A report replaces the trial's earlier report at the same batches (api/trial_protocol.py deletes it first): when
    the trial holds the experiment's best and this report is not better, its best is read again from its rows, and
    the experiment's recomputed when the replaced report was the best (a restarted run that validated worse).
    """
    metric, smaller = _searcher(exp)
    new = validation_key(value, smaller, steps, trial.id)
    if trial.best_validation is None or new[:2] < validation_key(trial.best_validation, smaller, 0, 0)[:2]:
        trial.best_validation = value
    if exp.best_validation is None or exp.best_trial_id is None:
        current: Optional[ValidationKey] = None
    else:
        current = validation_key(exp.best_validation, smaller, 0, exp.best_trial_id)
        if new[:2] >= current[:2] and (new[:2] == current[:2] or trial.id == exp.best_trial_id):
            # A tie on the metric (exact, and rare), or a report of the best trial: the best trial's rows tell the
            # batches of the stored best, which decide a tie, then the trial id.
            s.flush()
            held = _trial_best(s, exp.best_trial_id, metric, smaller)
            if held is None or held[:2] != current[:2]:
                return recompute_best(s, exp) == new
            current = held
            if trial.id == exp.best_trial_id:
                trial.best_validation = _value(held, smaller)
    if current is None or new < current:
        exp.best_validation = value
        exp.best_trial_id = trial.id
        return True
    return new == current
