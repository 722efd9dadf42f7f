"""Choosing which trials get free slots: by `resources.priority` (a smaller number first, as Determined's priority
scheduler; default 42), then fair share across experiments of the same priority, FIFO within and on ties."""
import collections
import dataclasses
from typing import Dict, List, Mapping, Optional, Set, Tuple

from sqlalchemy import ColumnElement, func, literal, select
from sqlalchemy.orm import Session, defer

from determined.master.lifecycle import states, trial_notes
from determined.master.lifecycle.actions import config_value
from determined.master.db import Experiment, SearcherOperation, Trial
from determined.master.lifecycle.experiment import runs_own_loop
from determined.master.scheduling import experiment_jobs, pools, queue_positions

DEFAULT_PRIORITY = 42  # Determined's default for experiments without resources.priority (see pools.py)


@dataclasses.dataclass
class _Demand:
    exp: Experiment
    waiting: int  # trials with work and no run (counted; `_next_waiting` reads them when they start)
    running_trials: int
    running_slots: int
    slots_per_trial: int
    max_slots: int  # 0: no limit
    max_concurrent: int  # 0: no limit
    weight: float
    priority: int
    pool: pools.Pool
    position: float  # the queue position (--ahead-of/--behind-of), else the submission time
    own_loop: bool = False  # its trials run their own loop (Determined 0.38): work until they end
    loaded: Optional[List[Trial]] = None  # its waiting trials read and not started yet, in id order
    last_id: Optional[int] = None  # the last waiting trial started


def slots_per_trial(exp: Experiment) -> int:
    return int(config_value(exp.config, "resources", "slots_per_trial", default=1))


def active_experiments(s: Session) -> List[Experiment]:
    """The active experiments whose trials the master runs, without their model definition archive (read only
    when a trial of theirs first starts: it may be tens of MB, and this runs at every tick)."""
    return list(s.scalars(select(Experiment).where(Experiment.state == states.ACTIVE, Experiment.unmanaged.is_not(True))
                          .options(defer(Experiment.model_def)).order_by(Experiment.id)))


ENDED_RUNS_INFO = "determined.ended_runs"  # the key, in a master's sessions' `info`, of the trials whose run ended


def ended_runs(s: Session) -> Set[int]:
    """The trials whose run has ended but whose end the master has not recorded yet (none for a session of no
    master)."""
    value = s.info.get(ENDED_RUNS_INFO)
    value = value() if callable(value) else value
    return set(value or ())


def _holds_a_run() -> "ColumnElement[bool]":
    """Whether a trial holds a run, selected through the index on `allocation_id` (`>= ''` holds for every string
    and for no NULL, as `IS NOT NULL`, which SQLite does not look up in that index)."""
    return Trial.allocation_id >= ""


def _demands(s: Session, cap: int, experiments: Optional[Dict[int, Experiment]] = None) -> Dict[int, _Demand]:
    """What every active experiment runs and waits for: its running and waiting trials, counted in the database (a
    search may hold thousands of waiting trials: only those that start are read, by `_next_waiting`).

    The waiting trials of each experiment are counted up to `cap` (at least 1): the caller passes at least as many
    as it could start or share out in this call, so that a larger count would change nothing it decides."""
    cluster = pools.of_session(s)
    positions = queue_positions.all_positions(s)
    demands: Dict[int, _Demand] = {}
    for exp in active_experiments(s):
        if experiments is not None:
            experiments[exp.id] = exp
        per_trial = slots_per_trial(exp)
        pool = cluster.pool_for(experiment_jobs.pool_name_of(exp))
        demands[exp.id] = _Demand(exp=exp, waiting=0, running_trials=0, running_slots=0, slots_per_trial=per_trial,
                                  max_slots=int(config_value(exp.config, "resources", "max_slots", default=0) or 0),
                                  max_concurrent=int(config_value(exp.config, "searcher", "max_concurrent_trials", default=0) or 0),
                                  weight=experiment_jobs.weight_of(exp), priority=experiment_jobs.priority_of(exp, pool),
                                  pool=pool, position=experiment_jobs.position_of(exp, positions))
    if not demands:
        return demands
    has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id, SearcherOperation.completed.is_(False)).exists()
    # Read over the running trials only, through the index (a search may hold thousands of trials), and counted
    # here: with a GROUP BY, SQLite walks the experiment_id index over every trial instead.
    running = collections.Counter(s.scalars(select(Trial.experiment_id).where(_holds_a_run())))
    for exp_id, count in running.items():
        demand = demands.get(exp_id)
        if demand is None:  # a trial of an experiment that is not active any more (its run is being stopped)
            continue
        demand.running_trials += int(count)
        demand.running_slots += int(count) * demand.slots_per_trial
    # Runs that ended but whose end is not recorded yet hold no slot: counted as running, an experiment whose trial
    # just ended would lose the next slot to another (two users of one priority would not alternate).
    ended = ended_runs(s)
    if ended:
        for exp_id in s.scalars(select(Trial.experiment_id).where(Trial.id.in_(sorted(ended)),
                                                                  Trial.allocation_id.is_not(None))):
            if exp_id in demands:
                demand = demands[exp_id]
                demand.running_trials -= 1
                demand.running_slots -= demand.slots_per_trial
    # A trial that runs its own loop (Determined 0.38) has work until it ends.
    own_loop = [exp_id for exp_id, d in demands.items() if runs_own_loop(d.exp)]
    for exp_id in own_loop:
        demands[exp_id].own_loop = True
    # Each experiment's waiting trials, at most `cap` of them (a count over a LIMIT-ed subquery per experiment): a
    # full count would walk every waiting trial of every search at every tick.
    first_waiting = (select(literal(1).label("one")).where(
        Trial.experiment_id == Experiment.id, Trial.state == states.ACTIVE, Trial.allocation_id.is_(None),
        has_work | Trial.close_requested.is_(True) | Trial.experiment_id.in_(own_loop))
        .limit(max(1, cap)).correlate(Experiment).subquery())
    waiting = s.execute(select(Experiment.id, select(func.count()).select_from(first_waiting).scalar_subquery())
                        .where(Experiment.id.in_(list(demands))))
    for exp_id, count in waiting:
        demands[exp_id].waiting = int(count or 0)
    return demands


def _next_waiting(s: Session, d: _Demand, batch: int) -> Trial:
    """The next waiting trial of the demand (the smallest id first), read `batch` at a time."""
    if not d.loaded:
        has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id,
                                                      SearcherOperation.completed.is_(False)).exists()
        ready = has_work | Trial.close_requested.is_(True) if not d.own_loop else Trial.id.is_not(None)
        taken = d.loaded is not None
        query = select(Trial).where(Trial.experiment_id == d.exp.id, Trial.state == states.ACTIVE,
                                    Trial.allocation_id.is_(None), ready).order_by(Trial.id)
        if taken and d.last_id is not None:
            query = query.where(Trial.id > d.last_id)
        d.loaded = list(s.scalars(query.limit(max(1, batch))))
    trial = d.loaded.pop(0)
    d.last_id = trial.id
    d.waiting -= 1
    return trial


def _order(d: _Demand) -> Tuple[float, ...]:
    """Which experiment gets the next slot. Priority scheduler: the smaller priority number, then the one holding
    the fewest slots for its weight (fair share within one priority), then the queue position. Fair-share
    scheduler: the fewest slots held for the weight, then the queue position."""
    share = d.running_slots / d.weight
    if d.pool.scheduler.type == pools.FAIR_SHARE:
        return (0.0, share, d.position, float(d.exp.id))
    return (float(d.priority), share, d.position, float(d.exp.id))


class _Free:
    """Free slots: one count for every pool (`int`), or a count per pool (pools with slots of their own)."""

    def __init__(self, free: "int | Mapping[str, int]") -> None:
        self.shared: Optional[int] = free if isinstance(free, int) else None
        self.by_pool: Dict[str, int] = {} if isinstance(free, int) else dict(free)

    def total(self) -> int:
        return self.shared if self.shared is not None else sum(max(0, n) for n in self.by_pool.values())

    def of(self, pool: str) -> int:
        return self.shared if self.shared is not None else self.by_pool.get(pool, 0)

    def take(self, pool: str, count: int) -> None:
        if self.shared is not None:
            self.shared -= count
        else:
            self.by_pool[pool] = self.by_pool.get(pool, 0) - count


def pick_trials(s: Session, free_slots: "int | Mapping[str, int]", zero_slot_room: int = 0,
                experiments: Optional[Dict[int, Experiment]] = None) -> List[Trial]:
    """Trials to start now on `free_slots` slots, honouring slots_per_trial, max_slots and max_concurrent_trials.

    A trial of `slots_per_trial: 0` (Determined's zero-slot task: CPU only, no GPU) takes no slot; at most
    `zero_slot_room` more of them start now (the master bounds how many run at once). `experiments`, when
    given, receives the active experiments by id (the caller starting the trials then finds them in the
    session without reading them again). `free_slots`: a count per pool when pools have slots of their own.

    In a pool whose scheduler preempts, a slotted trial that does not fit blocks the trials of lower priority
    (Determined: no backfilling past a pending job): the slots its preemptions free go to it, never back to the
    trials that gave them up."""
    free = _Free(free_slots)
    # This call starts at most one trial per free slot and `zero_slot_room` trials of no slot: no experiment's
    # waiting trials need counting past that.
    demands = _demands(s, max(0, free.total()) + max(0, zero_slot_room), experiments)
    if not demands:
        return []
    picked: List[Trial] = []
    blocked_below: Dict[str, float] = {}  # pool -> the priority of a pending job that does not fit there
    while True:
        candidates = []
        for d in demands.values():
            if not d.waiting or not _may_grow(d):
                continue
            if d.slots_per_trial and d.priority > blocked_below.get(d.pool.name, float("inf")):
                continue
            if d.slots_per_trial and d.slots_per_trial > free.of(d.pool.name):
                if d.pool.scheduler.type == pools.PRIORITY and d.pool.scheduler.preemption:
                    blocked = blocked_below.get(d.pool.name, float("inf"))
                    blocked_below[d.pool.name] = min(blocked, d.priority)
                continue
            if not d.slots_per_trial and zero_slot_room <= 0:
                continue
            candidates.append(d)
        candidates = [d for d in candidates if not d.slots_per_trial
                      or d.priority <= blocked_below.get(d.pool.name, float("inf"))]
        if not candidates:
            return picked
        demand = min(candidates, key=_order)
        trial = _next_waiting(s, demand, free.total() + zero_slot_room)
        picked.append(trial)
        free.take(demand.pool.name, demand.slots_per_trial)
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
        _holds_a_run(), Trial.state == states.ACTIVE, Trial.close_requested.is_(False),
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


def preemption_victims(s: Session, free_slots: "int | Mapping[str, int]",
                       capacity: "Optional[int | Mapping[str, int]]" = None) -> List[Trial]:
    """Running trials to preempt now so that a pending job of higher priority gets slots (Determined's priority
    scheduler with `preemption: true`; fair_share pools rebalance through `fair_share_victims`).

    The pending job is the first one of its pool's queue that has work and does not fit in the free slots. The
    victims are running trials of strictly lower priority (a larger number) in preempting pools: the lowest
    priority first, the newest first within one priority, just enough of them. Slots that runs already asked to
    preempt will free count first, so nothing is preempted twice for the same need; and nothing is preempted when
    even all candidates would not make room, nor when the pool's usable slots (`capacity`: what disabled agents,
    slots and drained Ray nodes leave) cannot hold the pending job."""
    cluster = pools.of_session(s)
    if not cluster.preempts:
        return []
    pool_capacity = _Free(capacity if capacity is not None else 0)
    # Whether a job waits needs 1 trial; its fair share (`_usable_slots`), as many trials as its pool has slots.
    most = pool_capacity.shared if pool_capacity.shared is not None else max(pool_capacity.by_pool.values(), default=0)
    demands = _demands(s, most)
    victims = _fair_share_victims(s, demands, _Free(free_slots), pool_capacity)
    if victims:
        return victims
    pending = [d for d in demands.values() if d.waiting and d.slots_per_trial and _may_grow(d)
               and d.pool.scheduler.type == pools.PRIORITY and d.pool.scheduler.preemption]
    if not pending:
        return []
    first = min(pending, key=_order)
    free = _Free(free_slots)
    if first.slots_per_trial <= free.of(first.pool.name):
        return []
    if capacity is not None and first.slots_per_trial > pool_capacity.of(first.pool.name):
        return []  # its pool's usable slots (disabled agents and slots are not) cannot hold it: preempting frees none
    running = [t for t in s.scalars(select(Trial).where(_holds_a_run())) if t.experiment_id in demands]
    if free.shared is None:  # pools with slots of their own: only the pending job's pool makes room for it
        running = [t for t in running if demands[t.experiment_id].pool.name == first.pool.name]
    free_slots = free.of(first.pool.name)
    freeing = sum(demands[t.experiment_id].slots_per_trial for t in running if t.preempt_requested)
    room = free_slots + freeing
    if room >= first.slots_per_trial:
        return []
    candidates = [t for t in running if not t.preempt_requested and t.state == states.ACTIVE
                  and demands[t.experiment_id].priority > first.priority
                  and demands[t.experiment_id].pool.scheduler.preempts]
    candidates.sort(key=lambda t: (-demands[t.experiment_id].priority, -t.id))
    victims: List[Trial] = []
    for trial in candidates:
        if room >= first.slots_per_trial:
            break
        victims.append(trial)
        room += demands[trial.experiment_id].slots_per_trial
    return victims if room >= first.slots_per_trial else []


def preempt_for_waiting_jobs(s: Session, free_slots: "int | Mapping[str, int]",
                         capacity: "Optional[int | Mapping[str, int]]" = None) -> List[Trial]:
    """Ask the `preemption_victims` to checkpoint and give their slots up (the caller holds a write transaction);
    they wait in the queue and resume from that checkpoint once the higher-priority job no longer needs the slots."""
    victims = preemption_victims(s, free_slots, capacity)
    for trial in victims:
        trial.preempt_requested = True
        exp = s.get(Experiment, trial.experiment_id)
        pool = experiment_jobs.pool_name_of(exp) if exp is not None else ""
        fair = pools.of_session(s).pool_for(pool).scheduler.type
        why = ("its experiment holds more than its fair share of the pool's slots" if fair == pools.FAIR_SHARE
               else "preempted by a job of higher priority")
        trial_notes.note(s, trial.id, f"{why}: it checkpoints and gives its slot up; it resumes from that "
                                      "checkpoint when the slots are free again")
    return victims


def fair_shares(capacity: int, wants: Mapping[int, Tuple[float, int]]) -> Dict[int, float]:
    """Each job's fair share of `capacity` slots: `wants` maps a job to (weight, the slots it could use); slots
    are split in proportion to the weights, and what a job cannot use goes to the others (water-filling)."""
    shares: Dict[int, float] = {}
    left = float(capacity)
    open_jobs = {k: v for k, v in wants.items() if v[1] > 0}
    while open_jobs:
        total = sum(w for w, _ in open_jobs.values())
        full = {k: v for k, v in open_jobs.items() if v[1] <= left * v[0] / total}
        if not full:
            for k, (w, _) in open_jobs.items():
                shares[k] = left * w / total
            break
        for k, (_, wanted) in full.items():
            shares[k] = float(wanted)
            left -= wanted
            del open_jobs[k]
    for k in wants:
        shares.setdefault(k, 0.0)
    return shares


def _usable_slots(d: _Demand) -> int:
    """The slots a job could hold now: what it runs and what its waiting trials would take, within max_slots and
    max_concurrent_trials."""
    trials = d.running_trials + d.waiting
    if d.max_concurrent:
        trials = min(trials, max(d.max_concurrent, d.running_trials))
    wanted = trials * d.slots_per_trial
    return min(wanted, max(d.max_slots, d.running_slots)) if d.max_slots else wanted


def _fair_share_victims(s: Session, demands: Dict[int, _Demand], free: _Free, capacity: _Free) -> List[Trial]:
    """Fair share (Determined's `fair_share` scheduler, which always rebalances): when a job of a fair_share pool
    holds less than its share, has work that does not fit in the free slots, and could take a whole trial without
    going past its share, a job holding more than its share gives up a trial (its newest), as long as it keeps at
    least its share. Each move brings both closer to their shares, so nothing is preempted back and forth."""
    by_pool: Dict[str, List[_Demand]] = {}
    for d in demands.values():
        if d.pool.scheduler.type == pools.FAIR_SHARE and d.slots_per_trial:
            by_pool.setdefault(d.pool.name, []).append(d)
    for pool, members in sorted(by_pool.items()):
        slots = capacity.of(pool)
        if slots <= 0:
            continue
        shares = fair_shares(slots, {d.exp.id: (d.weight, _usable_slots(d)) for d in members})
        starved = [d for d in members if d.waiting and _may_grow(d) and d.slots_per_trial > free.of(pool)
                   and d.running_slots + d.slots_per_trial <= shares[d.exp.id] + 1e-9]
        if not starved:
            continue
        needy = min(starved, key=lambda d: (d.running_slots / max(shares[d.exp.id], 1e-9), d.position, d.exp.id))
        member_ids = {d.exp.id for d in members}
        running = [t for t in s.scalars(select(Trial).where(_holds_a_run())) if t.experiment_id in member_ids]
        freeing = sum(demands[t.experiment_id].slots_per_trial for t in running if t.preempt_requested)
        if free.of(pool) + freeing >= needy.slots_per_trial:
            continue
        rich = sorted((d for d in members if d.running_slots - d.slots_per_trial >= shares[d.exp.id] - 1e-9
                       and d.exp.id != needy.exp.id),
                      key=lambda d: (-(d.running_slots - shares[d.exp.id]), -d.position))
        for d in rich:
            mine = sorted((t for t in running if t.experiment_id == d.exp.id and not t.preempt_requested
                           and t.state == states.ACTIVE), key=lambda t: -t.id)
            if mine and d.slots_per_trial + free.of(pool) + freeing >= needy.slots_per_trial:
                return [mine[0]]
    return []
