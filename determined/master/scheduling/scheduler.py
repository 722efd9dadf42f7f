"""Choosing which trials get free slots: by `resources.priority` (a smaller number first, as Determined's priority
scheduler; default 42), then fair share across experiments of the same priority, FIFO within and on ties."""
import dataclasses
from typing import Dict, List, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from determined.master.lifecycle import states, trial_notes
from determined.master.lifecycle.actions import config_value
from determined.master.db import Experiment, SearcherOperation, Trial
from determined.master.lifecycle.experiment import runs_own_loop

DEFAULT_PRIORITY = 42  # Determined's default for experiments without resources.priority


@dataclasses.dataclass
class _Demand:
    exp: Experiment
    waiting: List[Trial]
    running_trials: int
    running_slots: int
    slots_per_trial: int
    max_slots: int  # 0: no limit
    max_concurrent: int  # 0: no limit
    weight: float
    priority: int


def slots_per_trial(exp: Experiment) -> int:
    return int(config_value(exp.config, "resources", "slots_per_trial", default=1))


def active_experiments(s: Session) -> List[Experiment]:
    """The active experiments whose trials the master runs, without their model definition archive (read only
    when a trial of theirs first starts: it may be tens of MB, and this runs at every tick)."""
    return list(s.scalars(select(Experiment).where(Experiment.state == states.ACTIVE, Experiment.unmanaged.is_not(True))
                          .options(defer(Experiment.model_def)).order_by(Experiment.id)))


def pick_trials(s: Session, free_slots: int, zero_slot_room: int = 0,
                experiments: Optional[Dict[int, Experiment]] = None) -> List[Trial]:
    """Trials to start now on `free_slots` slots, honouring slots_per_trial, max_slots and max_concurrent_trials.

    A trial of `slots_per_trial: 0` (Determined's zero-slot task: CPU only, no GPU) takes no slot; at most
    `zero_slot_room` more of them start now (the master bounds how many run at once). `experiments`, when
    given, receives the active experiments by id (the caller starting the trials then finds them in the
    session without reading them again)."""
    demands: Dict[int, _Demand] = {}
    for exp in active_experiments(s):
        if experiments is not None:
            experiments[exp.id] = exp
        per_trial = slots_per_trial(exp)
        demands[exp.id] = _Demand(exp=exp, waiting=[], running_trials=0, running_slots=0, slots_per_trial=per_trial,
                                  max_slots=int(config_value(exp.config, "resources", "max_slots", default=0) or 0),
                                  max_concurrent=int(config_value(exp.config, "searcher", "max_concurrent_trials", default=0) or 0),
                                  weight=float(config_value(exp.config, "resources", "weight", default=1) or 1),
                                  priority=int(config_value(exp.config, "resources", "priority", default=None)
                                               or DEFAULT_PRIORITY))
    if not demands:
        return []
    has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id, SearcherOperation.completed.is_(False)).exists()
    # Counted in the database over the running trials only (indexed): a search may hold thousands of trials.
    running = s.execute(select(Trial.experiment_id, func.count()).where(
        Trial.experiment_id.in_(list(demands)), Trial.allocation_id.is_not(None)).group_by(Trial.experiment_id))
    for exp_id, count in running:
        demand = demands[exp_id]
        demand.running_trials += int(count)
        demand.running_slots += int(count) * demand.slots_per_trial
    # A trial that runs its own loop (Determined 0.38) has work until it ends.
    own_loop = [exp_id for exp_id, d in demands.items() if runs_own_loop(d.exp)]
    waiting = s.scalars(select(Trial).where(
        Trial.experiment_id.in_(list(demands)), Trial.state == states.ACTIVE, Trial.allocation_id.is_(None),
        has_work | Trial.close_requested.is_(True) | Trial.experiment_id.in_(own_loop)).order_by(Trial.id))
    for trial in waiting:
        demands[trial.experiment_id].waiting.append(trial)

    picked: List[Trial] = []
    while True:
        candidates = [d for d in demands.values() if d.waiting and _may_grow(d) and (
            d.slots_per_trial <= free_slots if d.slots_per_trial else zero_slot_room > 0)]
        if not candidates:
            return picked
        demand = min(candidates, key=lambda d: (d.priority, d.running_slots / d.weight, d.exp.id))
        trial = demand.waiting.pop(0)
        picked.append(trial)
        free_slots -= demand.slots_per_trial
        zero_slot_room -= 0 if demand.slots_per_trial else 1
        demand.running_trials += 1
        demand.running_slots += demand.slots_per_trial


def has_waiting_work(s: Session) -> bool:
    """Whether a trial of an active experiment waits for a slot with an operation to do (one query, for a tick
    that may start runs before anything else; `pick_trials` decides which, and also sees the trials of
    experiments that run their own loop, which have work without operations)."""
    active = select(Experiment.id).where(Experiment.state == states.ACTIVE, Experiment.unmanaged.is_not(True))
    has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id,
                                                  SearcherOperation.completed.is_(False)).exists()
    return s.scalar(select(Trial.id).where(Trial.experiment_id.in_(active), Trial.state == states.ACTIVE,
                                           Trial.allocation_id.is_(None), has_work).limit(1)) is not None


def has_zero_slot_work(s: Session) -> bool:
    """Whether an active experiment has `slots_per_trial: 0` (a read: its trials may start with no free slot)."""
    return any(slots_per_trial(exp) == 0 for exp in active_experiments(s))


def _may_grow(d: _Demand) -> bool:
    if d.max_concurrent and d.running_trials >= d.max_concurrent:
        return False
    if d.max_slots and d.running_slots + d.slots_per_trial > d.max_slots:
        return False
    return True


def idle_trials(s: Session) -> List[Trial]:
    """Running trials that have no work (waiting for the search method) while a trial with work has no slot."""
    has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id, SearcherOperation.completed.is_(False)).exists()
    idle = list(s.scalars(select(Trial).where(
        Trial.allocation_id.is_not(None), Trial.state == states.ACTIVE, Trial.close_requested.is_(False),
        Trial.preempt_requested.is_(False), ~has_work)))
    # A trial that runs its own loop (Determined 0.38) is never waiting for the search method.
    idle = [t for t in idle if not runs_own_loop(s.get(Experiment, t.experiment_id))]  # type: ignore[arg-type]
    if not idle:  # the usual case, and a query over the running trials only
        return []
    active = select(Experiment.id).where(Experiment.state == states.ACTIVE)
    starved = s.scalars(select(Trial.id).where(
        Trial.experiment_id.in_(active), Trial.state == states.ACTIVE, Trial.allocation_id.is_(None), has_work).limit(1)).first()
    return idle if starved is not None else []


def release_idle_trials(s: Session) -> List[Trial]:
    """Ask running trials that have no work (waiting for the search method) to give their slots back.

    Only done while another trial of an active experiment has work but no slots: an ASHA trial waiting for
    promotion, or a PBT member waiting for its round, must not block the trials whose results it waits for.
    The released trials checkpointed when they finished their last operation; they start again when the
    search method gives them work.
    """
    idle = idle_trials(s)
    for trial in idle:
        trial.preempt_requested = True
        trial_notes.note(s, trial.id, "waiting for the search method: it checkpoints and gives its slot to a trial "
                                      "with work; it resumes when it gets work")
    return idle
