"""Lines the master adds to a trial's logs (stream `master`): each run's start and end, restarts and why, each
validation's metrics, each checkpoint, and why the trial ended. Together with the trial's own output they
tell its story in `det trial logs` and on its page.

State-machine code calls `note(s, trial_id, text)` inside its transaction; `Master.write` hands the notes
to the log writer once the transaction has committed (a rolled-back change leaves no line).
"""
import datetime
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from determined.common.formats import fmt_bytes, fmt_number
from determined.master.views import reads
from determined.master.lifecycle import trial_status
from determined.master.db import utcnow
from determined.master.views.dbread import TRIAL_COLUMNS, in_list, reader_of

STREAM = "master"
PREFIX = "[master] "
_NOTES = "determined_trial_notes"
_ENDED = "determined_trials_ended"

Note = Tuple[int, datetime.datetime, str]


def note(s: Any, trial_id: int, text: str) -> None:
    """Queue `text` for the trial's logs, written when the session's transaction commits."""
    s.info.setdefault(_NOTES, []).append((int(trial_id), utcnow(), PREFIX + text))


def ended(s: Any, trial_id: int) -> None:
    """Remember that the trial ended in this transaction (the master then writes why, with its status)."""
    s.info.setdefault(_ENDED, []).append(int(trial_id))


def take(s: Any) -> Tuple[List[Note], List[int]]:
    """The notes and ended trials of the session's committed transaction (and forget them)."""
    return s.info.pop(_NOTES, []), s.info.pop(_ENDED, [])


def discard(s: Any) -> None:
    s.info.pop(_NOTES, None)
    s.info.pop(_ENDED, None)


def metrics_text(metrics: Mapping[str, Any]) -> str:
    shown = [f"{k}={fmt_number(v)}" for k, v in sorted(metrics.items()) if isinstance(v, (int, float, type(None)))]
    return ", ".join(shown) or "no numeric metrics"


def checkpoint_text(uuid: str, steps: int, resources: Mapping[str, Any], at: datetime.datetime) -> str:
    sizes: Dict[str, float] = {k: float(v) for k, v in resources.items() if isinstance(v, (int, float))}
    files = f"{len(sizes)} file{'s' if len(sizes) != 1 else ''}"
    return (f"checkpoint {uuid} at batch {steps}: {fmt_bytes(sum(sizes.values()))} in {files}, "
            f"saved {at.strftime('%Y-%m-%d %H:%M:%S')} UTC")


_END_NOTES_CHUNK = 50  # trials whose statuses are read together (trial_status reads only theirs up to 50)


def end_notes(s: Any, trial_ids: Iterable[int]) -> List[Note]:
    """`trial ended: STATUS: why` for each trial (read after the change that ended it committed).

    The trials that ended in one transaction (a scheduler tick records many) are read together: their rows in
    one query, each experiment once, the statuses of up to 50 trials of an experiment in one pass."""
    db = reader_of(s)
    wanted = list(dict.fromkeys(int(t) for t in trial_ids))
    rows: Dict[int, Any] = {}
    for start in range(0, len(wanted), _END_NOTES_CHUNK):
        names, params = in_list("t", wanted[start:start + _END_NOTES_CHUNK])
        for row in db.rows(f"SELECT {TRIAL_COLUMNS} FROM trials WHERE id IN {names}", **params):
            rows[row.id] = row
    by_experiment: Dict[int, List[Any]] = {}
    for trial_id in wanted:
        if trial_id not in rows:
            reads.trial_row(db, trial_id)  # raises the usual "not found"
        by_experiment.setdefault(rows[trial_id].experiment_id, []).append(rows[trial_id])
    texts: Dict[int, str] = {}
    for exp_id, trials in by_experiment.items():
        exp = reads.experiment_row(db, exp_id)
        for start in range(0, len(trials), _END_NOTES_CHUNK):
            chunk = trials[start:start + _END_NOTES_CHUNK]
            for trial_id, (status, reason) in trial_status.statuses(db, exp, chunk).items():
                texts[trial_id] = f"{PREFIX}trial ended: {status}" + (f": {reason}" if reason else "")
    return [(trial_id, utcnow(), texts[trial_id]) for trial_id in wanted]
