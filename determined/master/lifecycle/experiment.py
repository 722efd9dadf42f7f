"""The experiment state machine: search events in, trials and per-trial operation queues out.

Every function here works inside one database transaction (a SQLAlchemy session) that the caller commits;
the search method's snapshot is written in the same transaction as the effects of the event that changed it.
Process control is left to the scheduler, which reads the intent recorded here (`preempt_requested`,
`STOPPING_KILLED`) and acts on it.
"""
import collections
import dataclasses
import logging
from typing import Any, Deque, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session, object_session

from determined import searcher
from determined.config import searcher_drives_trials
from determined.common.metric_groups import SYSTEM_GROUPS
from determined.master.lifecycle import states, trial_notes, trial_status, unmanaged
from determined.master.lifecycle.best_validation import recompute_best
from determined.master.db import (
    Checkpoint,
    Experiment,
    GroupMetrics,
    SearcherEvent,
    SearcherOperation,
    TrainingMetrics,
    Trial,
    TrialLog,
    ValidationMetrics,
    utcnow,
)
from determined.master.lifecycle.lengths import from_batches, to_batches
from determined.master.lifecycle.records import get_experiment, get_trial, trial_seed  # noqa: F401 (callers' names)
from determined.master.problems import RequestProblem

logger = logging.getLogger("determined.master")

Event = Tuple[str, Dict[str, Any]]

# The most an experiment that did not finish its search (it ended in ERROR) may show as its progress.
PROGRESS_NOT_DONE = 0.99


# ---------------------------------------------------------------- lookups


def trials_of(s: Session, experiment_id: int) -> List[Trial]:
    return list(s.scalars(select(Trial).where(Trial.experiment_id == experiment_id).order_by(Trial.id)))


def pending_operations(s: Session, trial_id: int) -> List[SearcherOperation]:
    query = select(SearcherOperation).where(SearcherOperation.trial_id == trial_id, SearcherOperation.completed.is_(False))
    query = query.order_by(SearcherOperation.id)
    if _operations_unflushed(s):
        return list(s.scalars(query))
    # Nothing the session changed can alter the answer: no flush of its other changes (the ending trial's run
    # fields, say) just for this read; they are written with the rest of the transaction.
    with s.no_autoflush:
        return list(s.scalars(query))


def _operations_unflushed(s: Session) -> bool:
    """Whether the session holds searcher operations it has added, changed or deleted but not flushed yet."""
    return any(isinstance(obj, SearcherOperation) for changed in (s.new, s.dirty, s.deleted) for obj in changed)


def latest_own_checkpoint(s: Session, trial_id: int) -> Optional[Checkpoint]:
    query = select(Checkpoint).where(Checkpoint.trial_id == trial_id, Checkpoint.state == states.COMPLETED)
    return s.scalars(query.order_by(Checkpoint.steps_completed.desc(), Checkpoint.id.desc()).limit(1)).first()


def start_steps(s: Session, trial: Trial) -> int:
    """Batches a trial has trained when it starts from `warm_start_checkpoint_uuid` (before its own checkpoints).

    A clone made by the search method (PBT) continues its parent's count: the checkpoint belongs to the
    same experiment. A warm start from `source_trial_id` / `source_checkpoint_uuid` is a new training run
    that begins at batch 0, as in Determined.
    """
    if not trial.warm_start_checkpoint_uuid:
        return 0
    source = s.scalars(select(Checkpoint).where(Checkpoint.uuid == trial.warm_start_checkpoint_uuid)).first()
    if source is None or source.experiment_id != trial.experiment_id:
        return 0
    return int(source.steps_completed)


def is_running(trial: Trial) -> bool:
    return trial.allocation_id is not None


def runs_own_loop(exp: Experiment) -> bool:
    """Whether the experiment's trials run their own loop until their process exits (Determined 0.38: no
    `searcher.max_length`, or ASHA with time_metric), rather than working through searcher operations."""
    return not searcher_drives_trials((exp.config or {}).get("searcher") or {})


# ---------------------------------------------------------------- the search method


# Sessions of a Master carry, under this key of `Session.info`, a callable giving the master's total slots (None
# for a master that runs no trials): the search methods create trials as the slots allow (SearchContext.window).
SLOTS_INFO = "total_slots"


def searcher_capacity(s: Session, exp: Experiment) -> Optional[int]:
    """How many trials of `exp` the master of session `s` can run at once; None outside a master."""
    total_slots = s.info.get(SLOTS_INFO)
    if total_slots is None:
        return None
    per_trial = int(((exp.config.get("resources") or {}).get("slots_per_trial")) or 1)
    return (total_slots() or 0) // max(1, per_trial)


def load_searcher(exp: Experiment, capacity: Optional[int] = None) -> searcher.Searcher:
    method = searcher.Searcher.from_config(exp.config, int(exp.config["reproducibility"]["experiment_seed"]),
                                           capacity)
    if exp.searcher_snapshot is not None:
        method.restore(exp.searcher_snapshot)
    return method


def _dispatch(method: searcher.Searcher, kind: str, args: Dict[str, Any]) -> List[searcher.Operation]:
    if kind == "initial":
        return method.initial_operations()
    if kind == "trial_created":
        return method.trial_created(args["request_id"])
    if kind == "validation_completed":
        return method.validation_completed(args["request_id"], args["metric"], args["length"])
    if kind == "trial_exited_early":
        return method.trial_exited_early(args["request_id"], searcher.ExitedReason(args["reason"]))
    if kind == "trial_closed":
        return method.trial_closed(args["request_id"])
    if kind == "validation_reported":
        return method.validation_reported(args["request_id"], args["metrics"])
    if kind == "trial_progress":
        return method.trial_progress(args["request_id"], args["progress"])
    if kind == "operations_posted":  # a custom search's runner answered an event
        return method.operations_posted(args["event_id"], [searcher.operation_from_dict(d) for d in args["operations"]])
    raise ValueError(f"unknown searcher event {kind!r}")


def feed_searcher(s: Session, exp: Experiment, events: List[Event]) -> None:
    """Feed events to the experiment's search method and carry out the operations it returns."""
    if exp.unmanaged:  # its trials are scripts run outside the platform: no search method (master/lifecycle/unmanaged.py)
        for kind, args in events:
            if kind == "trial_progress":
                unmanaged.trial_progress(exp, _trial_by_request(s, exp, args["request_id"]), args["progress"])
        _check_done(s, exp)
        return
    if exp.searcher_shutdown or exp.state in states.EXPERIMENT_TERMINAL:
        _check_done(s, exp)
        return
    method = load_searcher(exp, searcher_capacity(s, exp))
    queue: Deque[Event] = collections.deque(events)
    created = _Created()
    message: Optional[str] = None
    closed: List[str] = []  # request ids of the trials the method closed: their reasons are stored now
    while queue:
        kind, args = queue.popleft()
        ops = _dispatch(method, kind, args)
        if ops or kind != "trial_progress":  # progress reports are many: journaled only when they change something
            s.add(SearcherEvent(experiment_id=exp.id, event={"kind": kind, **args},
                                operations=[searcher.operation_to_dict(op) for op in ops]))
        for op in ops:
            if isinstance(op, searcher.Shutdown) and op.message:
                message = str(op.message)
            if isinstance(op, searcher.Close):
                closed.append(op.request_id)
            queue.extend(_apply_operation(s, exp, method, op, created))
        if exp.searcher_shutdown:
            break
    snapshot = method.snapshot()
    if message is not None:  # why the search stopped with an error: the trials' reasons say it (trial_status.py)
        snapshot[trial_status.SHUTDOWN_MESSAGE] = message
    trial_status.keep_stop_reasons(snapshot, exp.searcher_snapshot, method, exp.config, closed)
    exp.searcher_snapshot = snapshot
    if exp.searcher_shutdown and exp.searcher_failure:
        exp.progress = min(float(exp.progress or 0.0), PROGRESS_NOT_DONE)  # what was done before it failed
    else:
        exp.progress = 1.0 if exp.searcher_shutdown else method.progress(trained_units(s, exp, method.unit))
    s.flush()
    # A trial this call created and that is still open keeps the experiment going: no need to look (the usual
    # event of a search, a trial's end that creates the next one).
    if not any(t.state not in states.TRIAL_TERMINAL for t in created.trials.values()):
        _check_done(s, exp)


def fail_search(s: Session, exp: Experiment, message: str) -> None:
    """End the experiment's search with an error now, for a problem of its config found while its trials run (a
    searcher metric the trials do not report): no new trials, the open ones are closed and not restarted, their
    reasons and logs say `message`, and the experiment ends ERROR, as when a search method shuts down failing."""
    if exp.searcher_shutdown or exp.state in states.EXPERIMENT_TERMINAL:
        return
    method = load_searcher(exp, searcher_capacity(s, exp))
    _apply_operation(s, exp, method, searcher.Shutdown(failure=True, message=message), _Created())
    snapshot = method.snapshot()
    snapshot[trial_status.SHUTDOWN_MESSAGE] = message
    trial_status.keep_stop_reasons(snapshot, exp.searcher_snapshot, method, exp.config, ())
    exp.searcher_snapshot = snapshot
    exp.progress = min(float(exp.progress or 0.0), PROGRESS_NOT_DONE)
    s.flush()
    _check_done(s, exp)


def trained_units(s: Session, exp: Experiment, unit: str) -> "TrainedUnits":
    """Units (of the searcher's `unit`) each trial of the experiment has trained so far, by request id.

    Read lazily: the trials still training at once (one light query over the few that are not ended), any other
    trial only when the search method asks for it (built-in methods ask only about trials they still wait for),
    so an event of a search with thousands of ended trials does not read them all."""
    return TrainedUnits(s, exp, unit)


class TrainedUnits(Mapping[str, float]):
    """`trained_units`'s mapping: request id -> units trained, exact for every trial of the experiment."""

    def __init__(self, s: Session, exp: Experiment, unit: str) -> None:
        self._s, self._exp, self._unit = s, exp, unit
        self._known: Dict[str, float] = dict(self._rows(Trial.state.in_(sorted(states.TRIAL_OPEN))))
        self._all = False

    def _rows(self, *where: Any) -> List[Tuple[str, float]]:
        columns = [Trial.request_id, Trial.total_batches] + ([Trial.hparams] if self._unit != "batches" else [])
        rows = self._s.execute(select(*columns).where(Trial.experiment_id == self._exp.id, *where))
        if self._unit == "batches":
            return [(request_id, float(batches)) for request_id, batches in rows]
        return [(request_id, from_batches(self._unit, batches, hparams or {}, self._exp.config))
                for request_id, batches, hparams in rows]

    def _load_all(self) -> Dict[str, float]:
        if not self._all:
            self._known = dict(self._rows())
            self._all = True
        return self._known

    def __getitem__(self, request_id: str) -> float:
        if request_id not in self._known and not self._all:
            self._known.update(self._rows(Trial.request_id == request_id))
        return self._known[request_id]

    def __contains__(self, request_id: object) -> bool:
        try:
            self[request_id]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __bool__(self) -> bool:
        return bool(self._known) or bool(self._load_all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._load_all())

    def __len__(self) -> int:
        return len(self._load_all())


def progress_now(s: Session, exp: Experiment) -> Optional[float]:
    """The progress of an experiment that is searching, from what its trials trained so far; None otherwise.

    Reads only: the caller stores it (a read session must not write)."""
    if exp.searcher_shutdown or exp.state in states.EXPERIMENT_TERMINAL or exp.searcher_snapshot is None:
        return None
    method = load_searcher(exp)
    return method.progress(trained_units(s, exp, method.unit))


@dataclasses.dataclass
class _Created:
    """The trials one `feed_searcher` call creates (by request id) and those it gave work: found without a query."""

    trials: Dict[str, Trial] = dataclasses.field(default_factory=dict)
    with_work: Set[str] = dataclasses.field(default_factory=set)


def _trial_by_request(s: Session, exp: Experiment, request_id: str, created: Optional[_Created] = None) -> Trial:
    if created is not None and request_id in created.trials:
        return created.trials[request_id]
    trial = s.scalars(select(Trial).where(Trial.experiment_id == exp.id, Trial.request_id == request_id)).first()
    if trial is None:
        raise RuntimeError(f"the search method of experiment {exp.id} named an unknown trial request {request_id}")
    return trial


# Set in a transaction's session when it changed what the scheduler may start or should release: a trial created,
# work for a trial that does not run, the search shut down, a running trial left waiting for work (which another
# trial may need the slot of). `Master.write(wake=WAKE_IF_NEEDED)` wakes the scheduler only then. More work for a
# running trial, or a running trial closed, need no scheduler: the trial asks for its work itself, and exits.
SCHEDULING_CHANGED = "scheduling_changed"


def note_scheduling_change(s: Session) -> None:
    s.info[SCHEDULING_CHANGED] = True


def _apply_operation(s: Session, exp: Experiment, method: searcher.Searcher, op: searcher.Operation,
                     created: _Created) -> List[Event]:
    if isinstance(op, (searcher.Create, searcher.Shutdown)):
        note_scheduling_change(s)
    elif isinstance(op, searcher.ValidateAfter) and (
            op.request_id in created.trials or not is_running(_trial_by_request(s, exp, op.request_id, created))):
        note_scheduling_change(s)
    if isinstance(op, searcher.Create):
        trial = Trial(
            experiment_id=exp.id,
            request_id=op.request_id,
            hparams=dict(op.hparams),
            seed=trial_seed(int(exp.config["reproducibility"]["experiment_seed"]), op.request_id),
            state=states.PAUSED if exp.state == states.PAUSED else states.ACTIVE,
            restarts=0,
            total_batches=0,
            runs=0,
            preempt_requested=False,
            close_requested=False,
            warm_start_checkpoint_uuid=_start_checkpoint(s, exp, op.checkpoint),
        )
        s.add(trial)
        s.flush()
        created.trials[op.request_id] = trial
        return [("trial_created", {"request_id": op.request_id})]
    if isinstance(op, searcher.ValidateAfter):
        trial = _trial_by_request(s, exp, op.request_id, created)
        if trial.state in states.TRIAL_TERMINAL:
            return []
        length_batches = to_batches(method.unit, op.length, trial.hparams, exp.config)
        s.add(SearcherOperation(trial_id=trial.id, length=op.length, length_batches=length_batches, completed=False))
        trial.end_time = None  # it has work again (the time its last operation completed no longer says when it ended)
        if op.request_id in created.trials:
            created.with_work.add(op.request_id)
        else:
            s.flush()
        return []
    if isinstance(op, searcher.Close):
        trial = _trial_by_request(s, exp, op.request_id, created)
        if trial.state in states.TRIAL_TERMINAL:
            return []
        trial.close_requested = True
        if op.request_id in created.with_work:  # created by this call with work to do: it ends later
            return []
        if not is_running(trial) and not pending_operations(s, trial.id):
            _end_trial(trial, states.COMPLETED)
            return [("trial_closed", {"request_id": trial.request_id})]
        if is_running(trial) and runs_own_loop(exp):
            trial.preempt_requested = True  # stopped by the searcher: it checkpoints and exits, then COMPLETED
        return []
    if isinstance(op, searcher.Shutdown):
        if op.cancel and exp.state == states.ACTIVE:
            exp.state = states.STOPPING_CANCELED  # a custom search cancelled itself: the trials stop, it ends CANCELED
        exp.searcher_shutdown = True
        exp.searcher_failure = bool(op.failure)
        if op.message:
            logger.error("experiment %s: %s", exp.id, op.message)
        own_loop = runs_own_loop(exp)
        for trial in trials_of(s, exp.id):
            if trial.state in states.TRIAL_TERMINAL:
                continue
            s.execute(delete(SearcherOperation).where(SearcherOperation.trial_id == trial.id,
                                                      SearcherOperation.completed.is_(False)))
            trial.close_requested = True
            if op.message:
                s.add(TrialLog(trial_id=trial.id, timestamp=utcnow(), stream="master",
                               message=f"the search stopped with an error: {op.message}"))
            if not is_running(trial):
                _end_trial(trial, states.COMPLETED)
            elif own_loop or op.cancel:
                trial.preempt_requested = True
        if exp.state == states.ACTIVE and any(t.state not in states.TRIAL_TERMINAL for t in trials_of(s, exp.id)):
            exp.state = states.STOPPING_ERROR if op.failure else states.STOPPING_COMPLETED
        return []
    raise TypeError(f"unknown searcher operation {op!r}")


def _start_checkpoint(s: Session, exp: Experiment, checkpoint: Optional[Dict[str, Any]]) -> Optional[str]:
    """The uuid of the checkpoint a new trial starts from: a parent's latest (PBT) or a warm start."""
    if checkpoint is not None:
        if "uuid" in checkpoint:
            return str(checkpoint["uuid"])
        parent = _trial_by_request(s, exp, str(checkpoint["request_id"]))
        ckpt = latest_own_checkpoint(s, parent.id)
        if ckpt is None:
            raise RuntimeError(f"trial {parent.id} has no checkpoint to clone from")
        return ckpt.uuid
    return warm_start_checkpoint(s, exp.config)


def warm_start_checkpoint(s: Session, config: Dict[str, Any]) -> Optional[str]:
    """The checkpoint named by `searcher.source_checkpoint_uuid` / `source_trial_id`, checked to exist."""
    search = config.get("searcher") or {}
    uuid = search.get("source_checkpoint_uuid")
    if uuid:
        ckpt = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
        if ckpt is None or ckpt.state != states.COMPLETED:
            raise RequestProblem(400, "invalid warm start", [f"searcher.source_checkpoint_uuid: no completed checkpoint {uuid}"])
        return str(uuid)
    source_trial = search.get("source_trial_id")
    if source_trial:
        ckpt = latest_own_checkpoint(s, int(source_trial))
        if ckpt is None:
            raise RequestProblem(400, "invalid warm start",
                                 [f"searcher.source_trial_id: trial {source_trial} does not exist or has no completed checkpoint"])
        return ckpt.uuid
    return None


# ---------------------------------------------------------------- trial and experiment ends


def _end_trial(trial: Trial, state: str) -> None:
    """End a trial. A COMPLETED trial ended when its last operation completed (a trial that waited for a
    promotion that never came stopped training then, not when the search method closed it)."""
    if state != states.COMPLETED or trial.end_time is None:
        trial.end_time = utcnow()
    trial.state = state
    trial.allocation_id = None
    trial.session_token = None
    trial.preempt_requested = False
    session = object_session(trial)
    if session is not None:
        trial_notes.ended(session, trial.id)


def _check_done(s: Session, exp: Experiment) -> None:
    if exp.unmanaged:  # its state follows its trials' (master/lifecycle/unmanaged.py)
        unmanaged.refresh_state(s, exp)
        return
    if exp.state in states.EXPERIMENT_TERMINAL:
        return
    # One indexed probe, not every trial: it runs at each trial's end, and a search may have thousands.
    open_trial = select(Trial.id).where(Trial.experiment_id == exp.id, Trial.state.in_(sorted(states.TRIAL_OPEN)))
    if s.scalars(open_trial.limit(1)).first() is not None:
        return
    if exp.state == states.STOPPING_CANCELED:
        exp.state = states.CANCELED
    elif exp.searcher_shutdown:
        trial_states = set(s.scalars(select(Trial.state).where(Trial.experiment_id == exp.id).distinct()))
        all_errored = trial_states == {states.ERROR}
        exp.state = states.ERROR if (exp.searcher_failure or all_errored) else states.COMPLETED
        if exp.state == states.ERROR:
            exp.progress = progress_done(s, exp)
    else:
        return
    exp.end_time = utcnow()


def progress_done(s: Session, exp: Experiment) -> float:
    """The fraction of its search an experiment that ended in ERROR actually did: the units its trials trained over
    the units the search planned (`preview`'s total), below 1; the progress last stored when the plan is unknown."""
    stored = min(float(exp.progress or 0.0), PROGRESS_NOT_DONE)
    try:
        planned = searcher.preview(exp.config).get("total_length")
        unit = searcher.make_search_method(exp.config["searcher"]).unit
    except Exception:  # a search whose plan cannot be told in advance (custom): what was stored
        return stored
    if not planned:
        return stored
    trained = sum(trained_units(s, exp, unit).values())
    return min(PROGRESS_NOT_DONE, max(0.0, trained / float(planned)))


def finish_trial(s: Session, exp: Experiment, trial: Trial, state: str, reason: Optional[str]) -> None:
    """End a trial and tell the search method (an early exit first when `reason` is given)."""
    _end_trial(trial, state)
    if exp.state in (states.STOPPING_CANCELED,):
        _check_done(s, exp)
        return
    events: List[Event] = []
    if reason is not None:
        events.append(("trial_exited_early", {"request_id": trial.request_id, "reason": reason}))
    events.append(("trial_closed", {"request_id": trial.request_id}))
    feed_searcher(s, exp, events)


def validation_reported(s: Session, exp: Experiment, trial: Trial, metrics: Dict[str, Any]) -> None:
    """A trial that runs its own loop reported validation metrics: the search method sees them (unless it
    stopped the trial already: a stopped trial's later reports are ignored)."""
    if trial.close_requested or trial.state in states.TRIAL_TERMINAL:
        return
    feed_searcher(s, exp, [("validation_reported", {"request_id": trial.request_id, "metrics": dict(metrics)})])


def trial_progress(s: Session, exp: Experiment, trial: Trial, progress: float) -> None:
    """The trial reported its progress (0..1): the search method's progress, and so the experiment's, follows."""
    if trial.state in states.TRIAL_TERMINAL:
        return
    feed_searcher(s, exp, [("trial_progress", {"request_id": trial.request_id, "progress": float(progress)})])


def rollback_to_checkpoint(s: Session, exp: Experiment, trial: Trial) -> None:
    """Delete the trial's metrics reported after its latest checkpoint, so a restart never duplicates them."""
    ckpt = latest_own_checkpoint(s, trial.id)
    steps = ckpt.steps_completed if ckpt is not None else start_steps(s, trial)
    training = (TrainingMetrics.trial_id == trial.id, TrainingMetrics.steps_completed > steps)
    # The profiler's system metrics are counted in seconds, not batches: they stay.
    groups = (GroupMetrics.trial_id == trial.id, GroupMetrics.steps_completed > steps,
              GroupMetrics.group_name.not_in(SYSTEM_GROUPS))
    validations = (ValidationMetrics.trial_id == trial.id, ValidationMetrics.steps_completed > steps)
    # One probe first: a run usually starts or stops with nothing past its checkpoint, and then needs no DELETE.
    s.flush()
    any_training, any_groups, any_validations = s.execute(select(
        exists().where(*training), exists().where(*groups), exists().where(*validations))).one()
    trained = s.execute(delete(TrainingMetrics).where(*training)).rowcount if any_training else 0
    if any_groups:
        s.execute(delete(GroupMetrics).where(*groups))
    removed = s.execute(delete(ValidationMetrics).where(*validations)).rowcount if any_validations else 0
    trial.total_batches = steps
    if trained or removed:  # its kept learning curves are out of date (a restart that removes nothing keeps them)
        trial.metrics_version = (trial.metrics_version or 0) + 1
    trial.latest_checkpoint_uuid = ckpt.uuid if ckpt is not None else None
    s.flush()
    if removed:  # the best validations change only when validations are deleted
        recompute_best(s, exp)
