"""Why a job of the queue waits, in words (`waiting_reason` of GET /api/v1/job-queues, the web UI's Jobs page), from
what the master records and nothing else:

- the slots it still wants and the jobs ahead of it in its pool's queue (`waiting for 2 slots; 3 jobs ahead`);
- for an experiment, the trial that says most about it: a trial whose Ray run waits for a node's answer about its
  checkpoint storage (the run's own note in the trial's logs, `rm/ray.py`), else a trial that ran before and waits
  again, e.g. a preempted one (its status, `lifecycle/trial_status.py`, and the master's latest note in its logs:
  `run 1 checkpointed and stopped: it gave its slot up ...`).

A job that wants no slot it does not hold, and has no such trial, has no reason (None).
"""
from typing import Any, Dict, List, Mapping, Optional, Sequence

from sqlalchemy.orm import Session

from determined.master.lifecycle import trial_status
from determined.master.scheduling import jobs
from determined.master.views import reads
from determined.master.views.dbread import TRIAL_COLUMNS, Reader, in_list, reader_of

MAX_NOTE_CHARS = 300  # a note is shown in a table cell: its head says what happened


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def slots_text(job: jobs.Job, ahead: int) -> Optional[str]:
    """`waiting for 2 slots; 3 jobs ahead` (`holds 1 slot, waiting for 1 more; ...`), or None when it wants none."""
    missing = job.requested_slots - job.allocated_slots
    if missing <= 0:
        return None
    wants = (f"holds {_plural(job.allocated_slots, 'slot')}, waiting for {missing} more" if job.allocated_slots
             else f"waiting for {_plural(missing, 'slot')}")
    return f"{wants}; {_plural(ahead, 'job') + ' ahead' if ahead else 'no job ahead'} in pool {job.resource_pool!r}"


def _short(text: str) -> str:
    return text if len(text) <= MAX_NOTE_CHARS else text[:MAX_NOTE_CHARS - 1] + "…"


def _latest_log(db: Reader, trial_id: int, stream: str, prefix: str) -> Optional[str]:
    """The trial's latest log line of `stream` that starts with `prefix`."""
    row = db.first("SELECT message FROM trial_logs WHERE trial_id = :t AND stream = :s AND substr(message, 1, :n) = :p "
                   "ORDER BY id DESC LIMIT 1", t=trial_id, s=stream, n=len(prefix), p=prefix)
    return str(row.message).rstrip() if row is not None else None


def _storage_note(db: Reader, run: Any) -> Optional[str]:
    """A Ray run waiting for the nodes' answer about its checkpoint storage (state "storage"): its note."""
    if getattr(run, "state", None) != "storage" or getattr(run, "exit_code", None) is not None:
        return None
    prefix = f"[ray] run {run.allocation_id} "
    note = _latest_log(db, int(run.trial_id), "stdout", prefix)
    return f"trial {run.trial_id} {_short(note[len(prefix):])}" if note else None


def _rerun_note(db: Reader, exp_id: int, trial_id: int) -> Optional[str]:
    """A trial that ran before and waits for a slot again: its status and the master's latest note about it."""
    trial = db.first(f"SELECT {TRIAL_COLUMNS} FROM trials WHERE id = :t", t=trial_id)
    if trial is None:
        return None
    _, reason = trial_status.statuses(db, reads.experiment_row(db, exp_id), [trial])[trial_id]
    note = _latest_log(db, trial_id, "master", "[master] ")
    parts = [f"trial {trial_id} {reason}" if reason else f"trial {trial_id} waits"]
    if note:
        parts.append(_short(note[len("[master] "):]))
    return " (".join(parts) + (")" if len(parts) > 1 else "")


def _waiting_again(db: Reader, experiment_ids: Sequence[int]) -> Dict[int, int]:
    """Experiment -> its first trial that ran before and now waits for a slot (active, no run)."""
    out: Dict[int, int] = {}
    for start in range(0, len(experiment_ids), 500):
        names, params = in_list("e", list(experiment_ids[start:start + 500]))
        for row in db.rows(f"SELECT experiment_id, MIN(id) AS trial_id FROM trials WHERE experiment_id IN {names} "
                           f"AND state = 'ACTIVE' AND allocation_id IS NULL AND runs > 0 GROUP BY experiment_id",
                           **params):
            out[int(row.experiment_id)] = int(row.trial_id)
    return out


def waiting_reasons(s: Session, listed: List[jobs.Job], ahead: Mapping[str, int],
                    runs: Mapping[str, Any]) -> Dict[str, Optional[str]]:
    """`{job id: why it waits, or None}` for the jobs `listed`; `ahead`: jobs ahead of each (queue_updates.jobs_ahead);
    `runs`: the resource manager's runs (allocation id -> run), empty when no scheduler runs."""
    db = reader_of(s)
    out: Dict[str, Optional[str]] = {j.job_id: slots_text(j, ahead.get(j.job_id, 0)) for j in listed}
    experiments = {int(j.entity_id): j for j in listed if j.type == jobs.TYPE_EXPERIMENT and j.entity_id.isdigit()}
    details: Dict[int, str] = {}
    for run in runs.values():
        exp_id = getattr(run, "experiment_id", None)
        if exp_id in experiments and exp_id not in details:
            note = _storage_note(db, run)
            if note:
                details[exp_id] = note
    waiting = [e for e, j in experiments.items() if e not in details and out[j.job_id] is not None]
    for exp_id, trial_id in _waiting_again(db, waiting).items():
        note = _rerun_note(db, exp_id, trial_id)
        if note:
            details[exp_id] = note
    for exp_id, note in details.items():
        job_id = experiments[exp_id].job_id
        out[job_id] = f"{out[job_id]}; {note}" if out[job_id] else note
    return out
