"""Runs of trials: starting one, what its process's exit means, and recovery after a master restart."""
import logging
import secrets
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from determined import searcher
from determined.config.entrypoint import runs_a_script
from determined.master.lifecycle import log_policies, states, trial_notes
from determined.master.db import Experiment, SearcherOperation, Trial, utcnow
from determined.master.db.models import TrialLog
from determined.master.lifecycle.experiment import (
    _check_done,
    _end_trial,
    finish_trial,
    get_experiment,
    pending_operations,
    rollback_to_checkpoint,
    runs_own_loop,
)

logger = logging.getLogger("determined.master")

EARLY_EXIT_STATES = {"ERRORED": states.ERROR, "USER_CANCELED": states.CANCELED, "INVALID_HP": states.CANCELED,
                     "USER_REQUESTED_STOP": states.COMPLETED}
# What the search method hears of a reported early exit: a stop the trial requested is an early exit to it.
SEARCHER_REASONS = {"USER_REQUESTED_STOP": searcher.ExitedReason.USER_CANCELED.value}


def first_pending_lengths(s: Session, trials: Sequence[Trial]) -> Dict[int, Optional[int]]:
    """For trials about to start: the length (in batches) of each one's first pending searcher operation, or
    None when it has none; one query for all of them (`start_allocation` tells it in the run's start note)."""
    out: Dict[int, Optional[int]] = {t.id: None for t in trials}
    if not out:
        return out
    rows = s.execute(select(SearcherOperation.trial_id, SearcherOperation.length_batches)
                     .where(SearcherOperation.trial_id.in_(sorted(out)), SearcherOperation.completed.is_(False))
                     .order_by(SearcherOperation.id))
    for trial_id, length_batches in rows:
        if out[trial_id] is None:
            out[trial_id] = int(length_batches)
    return out


def start_allocation(s: Session, trial: Trial,
                     first_work: Optional[Mapping[int, Optional[int]]] = None) -> Tuple[str, str]:
    """Record a new run of the trial; returns its allocation id and session token. `first_work`: what
    `first_pending_lengths` read for the trials starting together (else it is read here)."""
    exp = get_experiment(s, trial.experiment_id)
    rollback_to_checkpoint(s, exp, trial)
    if not trial.runs:
        trial.start_time = utcnow()  # a trial starts when its first run does, not when the search created it
    trial.runs += 1
    trial.allocation_id = uuid.uuid4().hex
    trial.session_token = secrets.token_urlsafe(24)
    trial.preempt_requested = False
    trial.preempt_acked = False
    trial.early_exit_reason = None
    if first_work is not None and trial.id in first_work:
        length: Optional[int] = first_work[trial.id]
    else:
        pending = pending_operations(s, trial.id)
        length = pending[0].length_batches if pending else None
    checkpoint = trial.latest_checkpoint_uuid or trial.warm_start_checkpoint_uuid
    start = f"from checkpoint {checkpoint} at batch {trial.total_batches}" if checkpoint else "at batch 0"
    work = f"; it trains to {length} batches" if length is not None else ""
    trial_notes.note(s, trial.id, f"run {trial.runs} starts {start}{work}")
    return trial.allocation_id, trial.session_token


def load_for_exits(s: Session, trial_ids: Sequence[int]) -> List[Any]:
    """Load the trials of ended runs and their experiments (without the model definition archive) into the
    session in two queries; the caller keeps the returned objects while it records the exits, so that
    `process_exited` finds them in the session's identity map instead of reading them one by one."""
    if not trial_ids:
        return []
    trials = list(s.scalars(select(Trial).where(Trial.id.in_(sorted(set(trial_ids))))))
    exp_ids = sorted({t.experiment_id for t in trials})
    exps = list(s.scalars(select(Experiment).where(Experiment.id.in_(exp_ids))
                          .options(defer(Experiment.model_def)))) if exp_ids else []
    return [*trials, *exps]


def process_exited(s: Session, trial_id: int, allocation_id: str, returncode: int, *, master_stopping: bool = False) -> None:
    """Act on the exit of a trial's process.

    0 after the searcher closed the trial, or from a script that was not preempted -> COMPLETED; 0 after a
    preemption -> the trial waits to be rescheduled (PAUSED while its experiment is paused); a reported early
    exit -> its state; anything else -> a restart from the latest checkpoint, or ERROR once `max_restarts` is
    exceeded.

    A trial that runs its own loop (Determined 0.38: no searcher operations) lives as long as its process: 0 ->
    COMPLETED, unless the run acknowledged a preemption signal (pause, master shutdown: rescheduled); stopped by
    the searcher (a Close) it ends COMPLETED whatever it exits with after the signal.
    """
    trial = s.get(Trial, trial_id)
    if trial is None or trial.allocation_id != allocation_id:
        return
    exp = get_experiment(s, trial.experiment_id)
    preempted = trial.preempt_requested
    acked = bool(trial.preempt_acked)
    reason = trial.early_exit_reason
    trial.allocation_id = None
    trial.session_token = None
    trial.preempt_requested = False
    trial.preempt_acked = False
    trial.early_exit_reason = None

    if master_stopping:
        trial_notes.note(s, trial.id, f"run {trial.runs} stopped with the master (exit code {returncode}); it resumes "
                                      "from its latest checkpoint when a master runs the experiment again")
    elif preempted and returncode == 0:
        why = "its experiment is paused" if trial.state == states.PAUSED else (
            f"{_why_preempted(s, trial.id)}; it resumes from this checkpoint"
            if pending_operations(s, trial.id) or (runs_own_loop(exp) and not trial.close_requested) else
            "it gives its slot to a trial with work while it waits for the search method")
        trial_notes.note(s, trial.id, f"run {trial.runs} checkpointed and stopped: {why}")
    if trial.state in (states.STOPPING_KILLED, states.STOPPING_CANCELED):
        if exp.state == states.STOPPING_CANCELED:
            _end_trial(trial, states.CANCELED)
            _check_done(s, exp)
        else:
            finish_trial(s, exp, trial, states.CANCELED, searcher.ExitedReason.USER_CANCELED.value)
        return
    if reason is not None:
        finish_trial(s, exp, trial, EARLY_EXIT_STATES[reason], SEARCHER_REASONS.get(reason, reason))
        return
    if returncode == 0 and trial.close_requested and not pending_operations(s, trial.id):
        finish_trial(s, exp, trial, states.COMPLETED, None)
        return
    if runs_own_loop(exp) and not master_stopping:
        if trial.close_requested and preempted:  # stopped by the searcher; it may not survive the signal
            finish_trial(s, exp, trial, states.COMPLETED, None)
            return
        if returncode == 0 and not (preempted and acked):
            finish_trial(s, exp, trial, states.COMPLETED, None)
            return
    if returncode == 0 and not preempted and not master_stopping and runs_a_script(exp.config):
        # A script's trial lives as long as its process (Determined 0.18+): exit 0 is the end of the trial. A
        # search method that still expected work from it hears an early exit, so that it does not wait for it.
        done = trial.close_requested and not pending_operations(s, trial.id)
        finish_trial(s, exp, trial, states.COMPLETED, None if done else searcher.ExitedReason.USER_CANCELED.value)
        return
    if (returncode == 0 and preempted) or master_stopping:
        rollback_to_checkpoint(s, exp, trial)
        return
    _failed(s, exp, trial, returncode, allocation_id)


def _failed(s: Session, exp: Experiment, trial: Trial, returncode: int, allocation_id: str) -> None:
    """A run failed: restart the trial from its latest checkpoint, or end it in ERROR when it has used its
    `max_restarts` restarts or a `cancel_retries` log policy matched its logs. `trial.restarts` counts the
    restarts that happened, the number the trial's logs tell (one "restart N of M" line each)."""
    failed = f"run {trial.runs} failed with exit code {returncode}"
    canceled_by = log_policies.cancels_retries(trial, allocation_id)
    max_restarts = int(exp.config.get("max_restarts", 5))
    search_failed = bool(exp.searcher_shutdown and exp.searcher_failure)
    if canceled_by is not None or search_failed or trial.restarts >= max_restarts:
        if search_failed:  # the search ended with an error (its reason is in the trial's logs): nothing to retry
            logger.warning("trial %s failed (exit code %s) after its search ended with an error: ERROR", trial.id,
                           returncode)
            trial_notes.note(s, trial.id, f"{failed}; not restarted: the search ended with an error")
        elif canceled_by is not None:
            policy = repr(canceled_by.get("name") or canceled_by.get("line"))
            logger.warning("trial %s failed (exit code %s); log policy %s (cancel_retries) matched its logs: not "
                           "restarted: ERROR", trial.id, returncode, policy)
            trial_notes.note(s, trial.id, f"{failed}; log policy {policy} (cancel_retries) matched its logs: "
                                          "not restarted")
        else:
            logger.warning("trial %s failed (exit code %s) after %s restart(s) (max_restarts: %s): ERROR",
                           trial.id, returncode, trial.restarts, max_restarts)
            trial_notes.note(s, trial.id, f"{failed}; no restart left (max_restarts {max_restarts})")
        rollback_to_checkpoint(s, exp, trial)
        finish_trial(s, exp, trial, states.ERROR, searcher.ExitedReason.ERRORED.value)
        return
    trial.restarts += 1
    rollback_to_checkpoint(s, exp, trial)
    start = (f"checkpoint {trial.latest_checkpoint_uuid} (batch {trial.total_batches})" if trial.latest_checkpoint_uuid
             else "the start (no checkpoint yet)")
    logger.warning("trial %s failed (exit code %s): restart %s of %s, from %s", trial.id, returncode, trial.restarts,
                   max_restarts, start)
    trial_notes.note(s, trial.id, f"{failed}; restart {trial.restarts} of {max_restarts} from {start}")


def recover(s: Session) -> int:
    """After a master (re)start: runs recorded as live have no process any more; make them ready to restart."""
    count = 0
    for trial in s.scalars(select(Trial).where(Trial.allocation_id.is_not(None))):
        process_exited(s, trial.id, str(trial.allocation_id), 0, master_stopping=True)
        count += 1
    for exp in s.scalars(select(Experiment).where(Experiment.state.not_in(sorted(states.EXPERIMENT_TERMINAL)))):
        _check_done(s, exp)
    return count


def running_trial(s: Session, allocation_id: str) -> Optional[Trial]:
    return s.scalars(select(Trial).where(Trial.allocation_id == allocation_id)).first()


_PREEMPT_NOTE = ": it checkpoints and gives its slot"  # the master's note when it asks a run to give its slots up


def _why_preempted(s: Session, trial_id: int) -> str:
    """Why the trial's run gave its slots up, from the master's note when it asked (scheduling/scheduler.py: a job of
    higher priority or the fair share; scheduling/agent_moves.py: its agent disabled, its Ray node drained)."""
    asked = s.scalar(select(TrialLog.message).where(
        TrialLog.trial_id == trial_id, TrialLog.stream == trial_notes.STREAM,
        TrialLog.message.contains(_PREEMPT_NOTE)).order_by(TrialLog.id.desc()).limit(1))
    if not asked:
        return "it gave its slot up"
    why = asked[len(trial_notes.PREFIX):] if asked.startswith(trial_notes.PREFIX) else asked
    return f"it gave its slot up ({why.split(_PREEMPT_NOTE, 1)[0]})"
