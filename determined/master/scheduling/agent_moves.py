"""Trials that leave an agent: `det agent disable` without `--drain` (the local machine, a Ray node) and a Ray node
that Ray drains (`ray drain-node`, an autoscaler taking a spot node back). Each run on it is asked, through the
preemption signal, to checkpoint and give its slots up, with a note saying why; its trial goes back to the queue
(no restart is spent) and resumes from that checkpoint on an agent that takes runs."""
from typing import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.db import Trial
from determined.master.lifecycle import trial_notes


def preempt_runs(s: Session, why_by_allocation: Mapping[str, str]) -> int:
    """Ask the trials running these allocations (allocation id -> why it must leave its agent) to checkpoint and
    stop (the caller holds a write transaction); how many were asked."""
    if not why_by_allocation:
        return 0
    asked = 0
    for trial in s.scalars(select(Trial).where(Trial.allocation_id.in_(list(why_by_allocation)))):
        if trial.preempt_requested:
            continue
        trial.preempt_requested = True
        trial_notes.note(s, trial.id, f"{why_by_allocation[str(trial.allocation_id)]}: it checkpoints and gives its "
                                      "slots up; it resumes from that checkpoint when an agent takes it")
        asked += 1
    return asked
