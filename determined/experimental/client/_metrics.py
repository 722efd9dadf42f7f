"""Reported metrics as the 0.38 SDK returns them: TrialMetrics (any group), TrainingMetrics, ValidationMetrics."""
from __future__ import annotations

import dataclasses
import datetime
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional

from determined.experimental.client._common import UsageError, parse_time

if TYPE_CHECKING:
    from determined.common.api import Session


@dataclasses.dataclass
class TrialMetrics:
    """One report of a trial's metrics: `metrics` of `group` at `steps_completed` batches."""

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: Optional[datetime.datetime]
    metrics: Dict[str, Any]
    group: str
    batch_metrics: Optional[List[Dict[str, Any]]] = None

    @property
    def total_batches(self) -> int:
        """The batches trained when the metrics were reported (the name before 0.26)."""
        return self.steps_completed


@dataclasses.dataclass
class TrainingMetrics(TrialMetrics):
    """Training metrics (group `training`)."""


@dataclasses.dataclass
class ValidationMetrics(TrialMetrics):
    """Validation metrics (group `validation`)."""


_CLASSES = {"training": TrainingMetrics, "validation": ValidationMetrics}


def check_group(group: Any) -> str:
    if not isinstance(group, str) or not group or "." in group:
        raise UsageError(f"group must be a metric group's name (e.g. 'training', 'validation'), not {group!r}")
    return group


def trial_metric_records(session: Session, trial_id: int, group: str) -> List[Dict[str, Any]]:
    """The records of the reports of `group` the trial made (steps_completed, metrics, end_time, ...), by
    steps_completed."""
    if not isinstance(group, str) or not group:
        raise UsageError(f"group must be a metric group's name (e.g. 'training', 'validation'), not {group!r}")
    return list(session.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"])


def trial_metrics(session: Session, trial_id: int, group: str) -> Iterator[TrialMetrics]:
    """The metrics of `group` the trial reported, by steps_completed."""
    for m in trial_metric_records(session, trial_id, check_group(group)):
        yield _from_answer(trial_id, group, m)


def _from_answer(trial_id: int, group: str, m: Dict[str, Any]) -> TrialMetrics:
    cls = _CLASSES.get(group, TrialMetrics)
    return cls(trial_id=trial_id, trial_run_id=int(m.get("trial_run_id") or 0),
               steps_completed=int(m["steps_completed"]),
               end_time=parse_time((m.get("end_time") or "").rstrip("Z") or None),
               metrics=m["metrics"], group=group, batch_metrics=m.get("batch_metrics"))


def linked_metrics(session: Session, path: str, group: Optional[str]) -> Iterator[TrialMetrics]:
    """The metrics of the trials that reported using a checkpoint or a model version (`path` is its
    `.../metrics` route): trial by trial, group by group (training, validation, then the others), by step."""
    params = {"group": check_group(group)} if group is not None else None
    for m in session.get(path, params)["metrics"]:
        yield _from_answer(int(m["trial_id"]), str(m["group"]), m)


def groups_of(session: Session, trial_id: int) -> List[str]:
    return list(session.get(f"/trials/{trial_id}").get("metric_groups") or ["training", "validation"])


def trials_metrics(session: Session, trial_ids: Iterable[int], group: str) -> Iterator[TrialMetrics]:
    """The metrics of `group` of every trial, trial after trial."""
    check_group(group)
    ids = list(trial_ids) if not isinstance(trial_ids, (str, bytes)) else None
    if ids is None or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise UsageError(f"trial_ids must be a list of trial ids (ints), not {trial_ids!r}")
    for trial_id in ids:
        yield from trial_metrics(session, trial_id, group)
