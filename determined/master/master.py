"""The Master: database, state machine lock, resource manager and the scheduler thread that ties them."""
import concurrent.futures
import contextlib
import hashlib
import logging
import os
import pathlib
import queue
import threading
import time
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Sequence, Tuple, TypeVar

from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, defer, object_session, sessionmaker

from determined import errors
from determined.common.framework_scan import TrialImports, scan_archive
from determined.config import environment_variables
from determined.config.entrypoint import runs_a_script
from determined.master.lifecycle import allocations, protocol, states, trial_notes
from determined.master.security import isolation
from determined.master.rm.sandbox import Sandbox, sandbox_problem
from determined.master.rm.sandbox import describe_problem as describe_sandbox_problem
from determined.master.scheduling import agent_moves, experiment_jobs, pools, scheduler
from determined.master.storage import gc as checkpoint_gc
from determined.master.storage import storage_roots as storage_roots_mod
from determined.master.storage import storage_endpoints as storage_endpoints_mod
from determined.master.db import Experiment, Trial, engine as db_engine
from determined.master.lifecycle.experiment import SCHEDULING_CHANGED, SLOTS_INFO, progress_now
from determined.master.lifecycle.log_policies import LogPolicyMonitor
from determined.master.lifecycle.logs import LogLimits, LogWriter, is_disk_full
from determined.master.rm import LocalResourceManager, Slots, detect_slots
from determined.master.tasks.runner import TaskRunner
from determined.master.rm.base import ResourceManager, ResourceManagerFactory, describe_run
from determined.master.rm.trial_env import TrialUser

# Set in a write transaction's session when it changed an experiment's state (see `_note_experiment_state`).
_EXPERIMENT_STATE_CHANGED = "experiment_state_changed"
# `Master.write(wake=WAKE_IF_NEEDED)`
WAKE_IF_NEEDED = "if_needed"


@sqlalchemy_event.listens_for(Experiment.state, "set")
def _note_experiment_state(target: Experiment, value: Any, old: Any, initiator: Any) -> None:
    if value != old:
        session = object_session(target)
        if session is not None:
            session.info[_EXPERIMENT_STATE_CHANGED] = True


logger = logging.getLogger("determined.master")

DEFAULT_PREEMPTION_TIMEOUT = 60.0
GROUP_COMMIT_MAX = 256  # most items one group-commit transaction takes
# Seconds of one tick spent recording ended runs (each feeds its search method, which may create the next trial)
# and starting runs, together: the rest wait for the next tick, which follows at once, so a tick stays short however
# many runs end or start together (thousands of short trials) and others waiting for the master's lock get it. A
# tick records at least one ended run and starts at least one run when any is waiting, so each tick moves on.
TICK_BUDGET_S = 0.02
PROGRESS_REFRESH_S = 1.0  # how often the progress of experiments with running trials follows their training

Item = TypeVar("Item")
# Stores a batch of items on a connection inside one transaction; returns, per item, None (stored) or the
# exception its sender gets (the others are still committed).
BatchApply = Callable[[Connection, Sequence[Any]], List[Optional[BaseException]]]


class GroupCommit(Generic[Item]):
    """A writer thread that stores items submitted by many requests in shared transactions.

    While one transaction runs under the master's lock, new items queue up; the next transaction takes all
    of them (up to GROUP_COMMIT_MAX), so concurrent senders share one commit (one fsync on PostgreSQL).
    `submit` returns a future that is resolved once the item's transaction has committed. When a shared
    transaction fails, its items are retried one per transaction, so one bad item fails alone.
    """

    _STOP = object()

    def __init__(self, master: "Master", apply: BatchApply, name: str) -> None:
        self.master = master
        self.apply = apply
        self._queue: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"determined-{name}", daemon=True)
        self._thread.start()

    def submit(self, item: Item) -> "concurrent.futures.Future[None]":
        future: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        self._queue.put((item, future))
        return future

    def stop(self) -> None:
        """Store what is queued, then end the thread."""
        self._queue.put(self._STOP)
        self._thread.join()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            batch = [] if first is self._STOP else [first]
            stopping = first is self._STOP
            while len(batch) < GROUP_COMMIT_MAX:
                try:
                    entry = self._queue.get_nowait()
                except queue.Empty:
                    break
                if entry is self._STOP:
                    stopping = True
                else:
                    batch.append(entry)
            if batch:
                self._store(batch)
            if stopping:
                return

    def _store(self, batch: List[Any]) -> None:
        try:
            outcomes = self._transaction([item for item, _ in batch])
        except Exception as e:
            if len(batch) > 1:
                for entry in batch:
                    self._store([entry])
                return
            outcomes = [e]
        for (_, future), outcome in zip(batch, outcomes):
            if not future.set_running_or_notify_cancel():
                continue
            if outcome is None:
                future.set_result(None)
            else:
                future.set_exception(outcome)

    def _transaction(self, items: List[Any]) -> List[Optional[BaseException]]:
        with self.master.lock:
            with self.master.write_engine.begin() as connection:
                return self.apply(connection, items)


class Master:
    """Owns one data dir's database and, with `run_scheduler`, the trial processes that run its experiments.

    Every change to experiment/trial state happens under `lock` inside `write()`; reads use `read()`.
    `trial_command` replaces the harness command for tests (see LocalResourceManager).
    `resource_manager` builds another resource manager from (work root, log sink); default: the local one.
    `storage_roots` (servers) limits `shared_fs` and `directory` checkpoint storage to those directories
    (storage_roots.py), and s3 storage to AWS's endpoints and `storage_endpoints` (storage_endpoints.py);
    `trial_user` runs trial processes as that OS user and closes the data dir to it (isolation.py);
    `log_limits` caps trial log lines and each trial's logs (logs.py).
    """

    def __init__(
        self,
        data_dir: "str | os.PathLike[str]",
        db_url: Optional[str] = None,
        *,
        run_scheduler: bool,
        url: Optional[str] = None,
        slots: Optional[Slots] = None,
        trial_command: Optional[Sequence[str]] = None,
        preemption_timeout: float = DEFAULT_PREEMPTION_TIMEOUT,
        poll_interval: float = 0.2,
        resource_manager: Optional[ResourceManagerFactory] = None,
        storage_roots: Optional[Sequence[str]] = None,
        trial_user: Optional[TrialUser] = None,
        log_limits: Optional[LogLimits] = None,
        storage_endpoints: Optional[Sequence[str]] = None,
        resource_pools: Optional[pools.ClusterPools] = None,
    ) -> None:
        self.pools = resource_pools or pools.DEFAULT  # resource pools and their schedulers (scheduling/pools.py)
        if run_scheduler and self.pools.splits_slots:  # pools with slots of their own: this machine's slots
            if resource_manager is not None:
                raise errors.DeterminedError("resource_pools: `slots`/`gpus` split this machine's slots (the local "
                                             "resource manager); on a Ray cluster a pool names its nodes with "
                                             "`ray: {node_labels: ...}` or `ray: {resources: ...}` (docs/scheduling.md)")
            slots = slots if slots is not None else detect_slots()
            try:
                self.pools.slot_ids(slots.total, slots.gpus)
            except pools.PoolConfigError as e:
                raise errors.DeterminedError(str(e)) from None
        if run_scheduler and self.pools.splits_ray_nodes and resource_manager is None:
            raise errors.DeterminedError("resource_pools: `ray` names Ray nodes, but this master runs the local resource "
                                         "manager: start it with --resource-manager ray, or give the pool `slots`/`gpus`")
        self._pool_of: Dict[int, str] = {}  # experiment id -> the resource pool its config names
        self.data_dir = pathlib.Path(data_dir).expanduser().resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # None: any shared_fs directory (the embedded master, on its user's own machine); else the allowed roots.
        self.storage_roots = None if storage_roots is None else storage_roots_mod.resolve_roots(storage_roots,
                                                                                                self.data_dir)
        # S3 endpoints besides AWS's that a server sends requests to for its users (storage_endpoints.py).
        self.storage_endpoints = storage_endpoints_mod.resolve_endpoints(storage_endpoints)
        self.db_url = db_engine.resolve_db_url(self.data_dir, db_url)
        self.engine = db_engine.make_engine(self.db_url)
        db_engine.upgrade(self.engine)
        self._release_db_lock: Optional[Callable[[], None]] = None
        if run_scheduler:
            try:
                self._release_db_lock = db_engine.hold_master_lock(self.engine)
            except db_engine.DatabaseInUse as e:
                self.engine.dispose()
                raise errors.DeterminedError(str(e)) from None
        # the search methods create trials as the slots allow; the scheduler reads the pools (scheduling/pools.py)
        # and which runs ended but are not recorded yet (their trials hold no slot any more: scheduler.ENDED_RUNS_INFO)
        info = {SLOTS_INFO: self.total_slots, pools.POOLS_INFO: lambda: self.pools,
                scheduler.ENDED_RUNS_INFO: lambda: {t for t, _, _ in getattr(self, "_unrecorded_exits", ())}}
        self._reads = sessionmaker(self.engine, expire_on_commit=False, info=info)
        self._writes = sessionmaker(self.engine.execution_options(sqlite_immediate=True), expire_on_commit=False,
                                    info=info)
        self.write_engine = self.engine.execution_options(sqlite_immediate=True)
        self.lock = threading.RLock()
        self._group_commits: Dict[BatchApply, GroupCommit[Any]] = {}
        self._group_commits_lock = threading.Lock()
        self.url = url
        self.run_scheduler = run_scheduler
        self.preemption_timeout = preemption_timeout
        self.poll_interval = poll_interval
        self.rm: Optional[ResourceManager] = None
        self.log_writer: Optional[LogWriter] = None
        self.log_policies = LogPolicyMonitor()
        self.tasks: Optional[TaskRunner] = None  # interactive tasks (determined/master/tasks/), with the scheduler
        self.trial_user = trial_user
        # Exits of trial processes not recorded yet (the database refused the write: a full disk, say).
        self._unrecorded_exits: List[Tuple[int, str, int]] = []
        self.exits_recorded = 0  # ended runs recorded since the start (the scale benchmark reads it)
        self._trial_imports_of: Dict[int, Optional[TrialImports]] = {}  # experiment id -> what its Trial imports
        self._unrecorded_exits_logged = False
        if run_scheduler:
            self.log_writer = LogWriter(self._writes, limits=log_limits)
            sink = self.log_policies.wrap(self.log_writer.add)  # log_policies see every line of a trial
            if trial_user is not None:
                try:
                    isolation.protect_data_dir(self.data_dir, trial_user)
                except BaseException:  # nothing started yet: give the database back
                    if self._release_db_lock is not None:
                        self._release_db_lock()
                    self.engine.dispose()
                    raise
            if resource_manager is not None:  # e.g. the Ray resource manager (rm/ray.py)
                self.rm = resource_manager(str(self.data_dir / "work"), sink)
                use_pools = getattr(self.rm, "use_pools", None)  # the Ray RM places each pool on its nodes
                if use_pools is not None:
                    use_pools(self.pools)
                run_as_users = getattr(self.rm, "run_as_users", None)
                if trial_user is not None and run_as_users is not None:  # each node builds its runs' sandboxes
                    run_as_users(trial_user, data_dir=str(self.data_dir),
                                 storage_roots=[str(r) for r in self.storage_roots or []], hidden=self._hidden())
            else:
                self.rm = LocalResourceManager(str(self.data_dir / "work"), sink,
                                               sandbox=self._sandbox() if trial_user is not None else None,
                                               slots=slots if slots is not None else detect_slots(),
                                               trial_command=trial_command, trial_user=trial_user,
                                               # an embedded master (no server settings): its user's environment
                                               inherit_environment=storage_roots is None and trial_user is None,
                                               line_bytes=self.log_writer.limits.line_bytes)
        if self.rm is not None:
            self.tasks = TaskRunner(self)
        self._wake = threading.Event()
        self._experiments_changed = threading.Condition()
        self._experiment_changes = 0
        self._progress_refreshed = 0.0
        self._stop_requested = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._started = False
        self._stopped = False

    def _sandbox(self) -> Optional[Sandbox]:
        """The sandbox of every run (rm/sandbox.py), or None with the notice, once, of what is not isolated."""
        problem = sandbox_problem()
        if problem is not None:
            logger.warning(describe_sandbox_problem(problem))
            return None
        return Sandbox(str(self.data_dir), storage_roots=[str(r) for r in self.storage_roots or []],
                       hidden=self._hidden())

    def _hidden(self) -> List[str]:
        """What a sandbox hides besides the data dir: a SQLite database kept elsewhere."""
        url = self.engine.url
        return [url.database] if url.get_backend_name() == "sqlite" and url.database else []

    # ------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def write(self, *, wake: "bool | str" = True) -> Iterator[Session]:
        """A transaction that changes state: serialised by the master's lock, committed on success.

        The scheduler looks at the new state at once unless `wake` is false (a change that cannot start or
        stop anything, such as a metrics report); its own transactions never wake it again. `WAKE_IF_NEEDED`:
        only when the transaction changed an experiment's state or what the search method asks for (a report of
        a running trial, which mostly changes neither: a scheduler woken for nothing would compete with the
        trial's next request).
        """
        with self.lock:
            with self._writes() as s:
                try:
                    with s.begin():
                        yield s
                except BaseException:
                    trial_notes.discard(s)
                    raise
                notes, ended = trial_notes.take(s)
                state_changed = s.info.pop(_EXPERIMENT_STATE_CHANGED, False)
                scheduling_changed = s.info.pop(SCHEDULING_CHANGED, False)
        if wake == WAKE_IF_NEEDED:
            wake = state_changed or scheduling_changed
        self._log_notes(notes, ended)
        if state_changed:
            with self._experiments_changed:
                self._experiment_changes += 1
                self._experiments_changed.notify_all()
        if wake and threading.current_thread() is not self._thread:
            self.wake()

    def experiment_changes(self) -> int:
        """A count of the committed transactions that changed an experiment's state (for `wait_for_experiments`)."""
        return self._experiment_changes

    def wait_for_experiments(self, seen: int, timeout: float) -> int:
        """Wait up to `timeout` s until an experiment's state changes after the count `seen`; the count now. A
        process that runs the master follows its experiment with this instead of polling at a fixed interval."""
        with self._experiments_changed:
            self._experiments_changed.wait_for(lambda: self._experiment_changes != seen, timeout)
            return self._experiment_changes

    def _log_notes(self, notes: List[trial_notes.Note], ended: List[int]) -> None:
        """Write the committed transaction's trial notes, and why each trial that ended did, into trial logs."""
        if self.log_writer is None or not (notes or ended):
            return
        for trial_id, at, text in notes:
            self.log_writer.add(trial_id, at, trial_notes.STREAM, text)
        if ended:
            try:
                with self.read() as s:
                    for trial_id, at, text in trial_notes.end_notes(s, ended):
                        self.log_writer.add(trial_id, at, trial_notes.STREAM, text)
                self.log_writer.flush()  # a trial's story is in its logs as soon as it ended
            except Exception:  # a missing line must not fail the change that was committed
                logger.exception("could not write why trials %s ended into their logs", ended)

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        with self._reads() as s:
            yield s
            s.rollback()

    def group_commit(self, apply: BatchApply, name: str = "group-commit") -> GroupCommit[Any]:
        """The writer that stores items with `apply` in shared transactions (one per `apply`, started on first use)."""
        with self._group_commits_lock:
            writer = self._group_commits.get(apply)
            if writer is None:
                writer = self._group_commits[apply] = GroupCommit(self, apply, name)
            return writer

    def wake(self) -> None:
        """Make the scheduler look at the state now rather than at its next poll."""
        self._wake.set()

    # ------------------------------------------------------------ the scheduler thread

    def start(self, url: Optional[str] = None) -> None:
        """Resume experiments left ACTIVE and start scheduling (no-op without `run_scheduler`)."""
        if url is not None:
            self.url = url
        if not self.run_scheduler or self._started:
            return
        if not self.url:
            raise ValueError("the master needs its own URL (Master.start(url=...)) to give to trial processes")
        self._started = True
        with self.write() as s:
            recovered = allocations.recover(s)
        assert self.tasks is not None
        if self.tasks.recover():
            logger.info("interactive tasks left running by a previous master are recorded as ended")
        if recovered:
            logger.info("resuming %s trial(s) left running by a previous master", recovered)
        assert self.log_writer is not None
        self.log_writer.start()
        self._thread = threading.Thread(target=self._run, name="determined-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Preempt running trials so they checkpoint, wait up to `timeout` s, kill what is left, stop."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_timeout = self.preemption_timeout if timeout is None else timeout
        if self._thread is not None:
            self._stop_requested.set()
            self.wake()
            self._thread.join()
        if self.log_writer is not None:
            self.log_writer.stop()
        with self._group_commits_lock:
            writers, self._group_commits = list(self._group_commits.values()), {}
        for writer in writers:
            writer.stop()
        if self._release_db_lock is not None:
            self._release_db_lock()
            self._release_db_lock = None
        self.engine.dispose()

    def _run(self) -> None:
        # Trial processes are started from this thread (PR_SET_PDEATHSIG follows the thread that forked
        # them), so it lives until they are all gone.
        assert self.rm is not None
        self.rm.exit_listener = self.wake  # a run that ends is reaped at once, not at the next poll
        last_error, last_logged = "", 0.0
        while not self._stop_requested.is_set():
            try:
                self.tick()
            except Exception as e:  # the loop must survive a bad tick; the error is in the log (once a minute)
                if str(e) != last_error or time.monotonic() - last_logged > 60:
                    logger.exception("scheduler tick failed")
                    last_error, last_logged = str(e), time.monotonic()
            self._wake.wait(self.poll_interval)
            self._wake.clear()
        self._drain()
        # Experiments that ended since the last tick are collected before the master stops, so a foreground
        # run returns only after the GC of its experiment.
        try:
            checkpoint_gc.run_pending_gc(self)
        except Exception:
            logger.exception("checkpoint GC failed")

    def tick(self) -> None:
        assert self.rm is not None
        deadline = time.monotonic() + TICK_BUDGET_S
        if self._collect_exits() and not self._stop_requested.is_set() and self._has_waiting_work():
            # Runs that ended cleanly freed their slots and trials with work wait: start them first, then record
            # the ends (the next trial starts while its predecessor's end, and the search method's answer to it,
            # are recorded). A run that failed is recorded first, so that its trial's restart keeps its place.
            self._schedule(deadline)
        self._record_exits(deadline=deadline)
        self._move_off_leaving_nodes()
        # Only reads: no write transaction (and no master lock) for a tick that has nothing to change.
        with self.read() as s:
            running = list(s.scalars(select(Trial).where(Trial.allocation_id.is_not(None))))
            for trial in running:
                if trial.state == states.STOPPING_KILLED:
                    self.rm.kill(str(trial.allocation_id))
                elif trial.preempt_requested:
                    self.rm.preempt(str(trial.allocation_id), self._preemption_timeout_of(s, trial))
        if self.tasks is not None and not self._stop_requested.is_set():
            self.tasks.tick()  # tasks take free slots before trials (they are never preempted)
        self.rm.enforce_deadlines()
        if not self._stop_requested.is_set():
            self._schedule(deadline)
        checkpoint_gc.run_pending_gc(self)
        if time.monotonic() - self._progress_refreshed >= PROGRESS_REFRESH_S:
            self._progress_refreshed = time.monotonic()
            self._refresh_progress()

    def _move_off_leaving_nodes(self) -> None:
        """Runs on Ray nodes that Ray drains (`ray drain-node`, an autoscaler) checkpoint and move to other nodes
        (the Ray RM's `runs_leaving_nodes`; scheduling/agent_moves.py)."""
        leaving = getattr(self.rm, "runs_leaving_nodes", None)
        moves = leaving() if leaving is not None else {}
        if moves:
            with self.write() as s:
                agent_moves.preempt_runs(s, moves)

    def _has_waiting_work(self) -> bool:
        with self.read() as s:
            return scheduler.has_waiting_work(s)

    def _refresh_progress(self) -> None:
        """Move the progress of experiments whose trials run with what they trained since their last report to
        the search method (computed in a read; the write lock only when something moved)."""
        moved: Dict[int, float] = {}
        with self.read() as s:
            running = list(s.scalars(select(Trial.experiment_id).where(Trial.allocation_id.is_not(None)).distinct()))
            for exp_id in running:
                exp = s.get(Experiment, exp_id, options=[defer(Experiment.model_def)])
                value = progress_now(s, exp) if exp is not None else None
                if value is not None and abs(value - float(exp.progress or 0.0)) >= 1e-6:
                    moved[exp_id] = value
        if moved:
            with self.write(wake=False) as s:
                for exp_id, value in moved.items():
                    exp = s.get(Experiment, exp_id)
                    if exp is not None and not exp.searcher_shutdown and exp.state not in states.EXPERIMENT_TERMINAL:
                        exp.progress = value

    def _preemption_timeout_of(self, s: Session, trial: Trial) -> float:
        """How long a preempted run may take to checkpoint and exit: its experiment's `preemption_timeout`
        (Determined 0.37+), else the master's."""
        exp = s.get(Experiment, trial.experiment_id)
        own = (exp.config or {}).get("preemption_timeout") if exp is not None else None
        return float(own) if own else self.preemption_timeout

    def _reap(self, *, master_stopping: bool = False, deadline: Optional[float] = None) -> None:
        """Record the exits of ended runs, until `deadline` (time.monotonic(); at least one; None: all). An exit the
        database refuses (a full disk) is kept and recorded at a later tick: a trial's end is never lost, and its
        experiment never stays ACTIVE with nothing running."""
        self._collect_exits()
        self._record_exits(master_stopping=master_stopping, deadline=deadline)

    def _collect_exits(self) -> bool:
        """Take the runs that ended from the resource manager (their slots are free from now on) and store their
        last log lines; True when every one of them ended cleanly (exit code 0)."""
        assert self.rm is not None
        new = self.rm.poll_exited()
        if not new:
            return False
        for trial_id, allocation_id, code in new:
            logger.info("trial %s: run %s exited with code %s", trial_id, allocation_id, code)
        if self.log_writer is not None:
            for trial_id, _, _ in new:
                self.log_writer.run_ended(trial_id)
            # The runs' own lines are stored before their ends are: whoever sees a trial ended reads all its lines.
            self.log_writer.flush()
        self._unrecorded_exits += new
        return all(code == 0 for _, _, code in new)

    def _record_exits(self, *, master_stopping: bool = False, deadline: Optional[float] = None) -> None:
        """Record the exits `_collect_exits` took, until `deadline` (see `_reap`)."""
        exits, self._unrecorded_exits = self._unrecorded_exits, []
        if not exits:
            if self.log_policies.has_pending():
                with self.write(wake=False) as s:
                    self.log_policies.record(s)
            return
        recorded = 0
        try:
            with self.write() as s:
                self.log_policies.record(s)  # a run's matches count before its exit is handled (cancel_retries)
                # The ended runs' trials and experiments in two queries, held for the transaction: the session
                # keeps only weak references, and each exit would read its trial and experiment again.
                held = allocations.load_for_exits(s, [trial_id for trial_id, _, _ in exits])
                for trial_id, allocation_id, code in exits:
                    self.log_policies.forget(trial_id, allocation_id)
                    allocations.process_exited(s, trial_id, allocation_id, code, master_stopping=master_stopping)
                    recorded += 1
                    if not master_stopping and deadline is not None and time.monotonic() >= deadline:
                        break
        except Exception as e:
            if not self._unrecorded_exits_logged:
                logger.error("could not record the exit of %s trial run(s) (%s); retrying%s", len(exits),
                             str(e).splitlines()[0][:300] if str(e) else e.__class__.__name__,
                             " until the disk has space again" if is_disk_full(e) else "")
            self._unrecorded_exits, self._unrecorded_exits_logged = exits, True
            return
        del held
        if self.log_writer is not None:
            # The master's notes of the ends (a no-op when the notes of the transaction flushed them already).
            self.log_writer.flush()
        self.exits_recorded += recorded
        if recorded < len(exits):  # the tick's budget is spent: the next tick records the rest, at once
            self._unrecorded_exits = exits[recorded:]
            self.wake()
        if self._unrecorded_exits_logged:
            logger.warning("recorded the exits of %s trial run(s) that had waited", recorded)
            self._unrecorded_exits_logged = recorded < len(exits)

    def _trial_imports(self, exp: Experiment) -> Optional[TrialImports]:
        """The framework and the outside modules the experiment's Trial class imports (read once from its source;
        None: unknown), so that the local RM can start its trials in a process that has imported them."""
        if exp.id not in self._trial_imports_of:
            native = ((exp.config.get("internal") or {}).get("native") or {}).get("command")
            self._trial_imports_of[exp.id] = (None if native or not getattr(self.rm, "warm", False)
                                              else scan_archive(exp.model_def, exp.config.get("entrypoint")))
        return self._trial_imports_of[exp.id]

    def _zero_slot_room(self) -> int:
        """How many more trials of `slots_per_trial: 0` may start: they take no slot, and at most as many run at
        once as the master has slots (at least one), as Determined bounds zero-slot containers per agent."""
        assert self.rm is not None
        agent = getattr(self.rm, "agent", None)  # the local machine, disabled (`det agent disable`): nothing starts
        if agent is not None and not agent.enabled:
            return 0
        running = sum(1 for run in self.rm.running().values() if not describe_run(run)["slot_ids"])
        return max(1, int(self.rm.total_slots or 0)) - running

    def _pool_slots(self) -> Optional[Dict[str, List[int]]]:
        """The slot indices of each resource pool when pools have slots of their own (the local resource
        manager's; scheduling/pools.py), else None: every pool draws from every slot."""
        if not self.pools.splits_slots or self.rm is None:
            return None
        return self.pools.slot_ids(self.rm.total_slots, list(getattr(self.rm.slots, "gpus", []) or []))

    def _ray_pools(self) -> bool:
        """Whether pools have Ray nodes of their own (the Ray RM counts each pool's slots: rm/ray.py)."""
        return self.pools.splits_ray_nodes and hasattr(self.rm, "pool_free_slots")

    def _pool_capacity(self) -> "int | Dict[str, int]":
        """The usable slots of each pool (all of them when pools do not have slots of their own): on the local
        machine not those of a disabled agent or slot (`det agent|slot disable`: rm/agent_state.py)."""
        assert self.rm is not None
        if self._ray_pools():
            return dict(self.rm.pool_totals())  # type: ignore[attr-defined]
        pool_slots = self._pool_slots()
        agent = getattr(self.rm, "agent", None)
        usable = (lambda ids: sum(1 for i in ids if agent.takes(i))) if agent is not None else len
        return (usable(range(self.rm.total_slots)) if pool_slots is None
                else {name: usable(ids) for name, ids in pool_slots.items()})

    def _free_by_pool(self) -> "int | Dict[str, int]":
        """The free slots, per pool when pools have slots (or Ray nodes) of their own."""
        assert self.rm is not None
        if self._ray_pools():
            return dict(self.rm.pool_free_slots())  # type: ignore[attr-defined]
        pool_slots = self._pool_slots()
        if pool_slots is None:
            return self.rm.free_slots()
        free_ids = set(getattr(self.rm, "free_slot_ids", lambda: [])())
        return {name: sum(1 for i in ids if i in free_ids) for name, ids in pool_slots.items()}

    def _schedule(self, deadline: Optional[float] = None) -> None:
        """Start runs of trials with work on the free slots, until `deadline` (time.monotonic(); at least one run;
        None: every trial that fits)."""
        assert self.rm is not None and self.url is not None
        free = self.rm.free_slots()
        pool_slots = self._pool_slots()  # pools with slots of their own: the free slots of each
        free_by_pool = self._free_by_pool() if pool_slots is not None or self._ray_pools() else None
        zero_room = self._zero_slot_room()
        launches = []
        if free <= 0 and zero_room > 0:  # a read first: the usual tick with no slot free takes no write lock
            with self.read() as s:
                zero_room = zero_room if scheduler.has_zero_slot_work(s) else 0
        if free > 0 or zero_room > 0:
            with self.write() as s:
                experiments: Dict[int, Experiment] = {}  # held while the trials start (the session's are weak)
                picked = scheduler.pick_trials(s, free if free_by_pool is None else free_by_pool, zero_room,
                                               experiments)
                first_work = allocations.first_pending_lengths(s, picked)
                for trial in picked:
                    if launches and deadline is not None and time.monotonic() >= deadline:
                        self.wake()  # the tick's budget is spent: the next tick starts the others, at once
                        break
                    exp = experiments[trial.experiment_id]
                    allocation_id, token = allocations.start_allocation(s, trial, first_work)
                    self.log_policies.watch(trial.id, allocation_id, exp.config)
                    env = environment_variables(exp.config, "cuda" if self.rm.slots.kind == "gpu" else "cpu")
                    script = runs_a_script(exp.config)
                    # A resource manager that can hand the run its context (the local one: a file in the run's
                    # directory) saves the run its first request: the answer it would get is computed now.
                    context = (protocol.run_start_context(s, trial, cluster_id=self.cluster_id,
                                                          data_dir=str(self.data_dir))
                               if getattr(self.rm, "hands_over_context", False) else None)
                    # The OS account and the sandbox of the run, for a resource manager that runs users' trials as
                    # their accounts (security/isolation.py).
                    run = (isolation.run_request(s, exp, trial, self.data_dir)
                           if getattr(self.rm, "runs_as_users", False) else None)
                    self._pool_of[exp.id] = experiment_jobs.pool_name_of(exp)
                    launches.append((trial.id, exp.id, allocation_id, token, scheduler.slots_per_trial(exp), env,
                                     script, None if script else self._trial_imports(exp), context, run))
        for trial_id, exp_id, allocation_id, token, slots, env, script, imports, context, run in launches:
            try:
                # framework and modules for a resource manager with fork servers, context for one that hands it over
                kwargs: Dict[str, Any] = {"framework": imports.framework, "preload": imports.modules} if imports else {}
                if context is not None:
                    kwargs["context"] = context
                if run is not None:
                    kwargs["run"] = run
                if pool_slots is not None:  # the slots of the experiment's resource pool
                    kwargs["slot_ids"] = pool_slots[self.pools.pool_for(self._pool_of.get(exp_id, "")).name]
                elif hasattr(self.rm, "use_pools"):  # the Ray RM: the nodes of the experiment's pool
                    kwargs["resource_pool"] = self.pools.pool_for(self._pool_of.get(exp_id, "")).name
                self.rm.launch(trial_id=trial_id, experiment_id=exp_id, allocation_id=allocation_id, token=token,
                               slots_needed=slots, master_url=self.url, env=env, script=script, **kwargs)
            except Exception as e:
                logger.error("trial %s: could not start its process: %s", trial_id, e)
                with self.write() as s:
                    allocations.process_exited(s, trial_id, allocation_id, 127)
        if self.pools.preempts:  # a pool whose scheduler preempts (scheduling/pools.py): a read first
            with self.read() as s:
                victims = scheduler.preemption_victims(s, self._free_by_pool(), self._pool_capacity())
            if victims:
                with self.write() as s:
                    for trial in scheduler.preempt_for_waiting_jobs(s, self._free_by_pool(), self._pool_capacity()):
                        logger.info("trial %s: preempted (priority or fair share)", trial.id)
                self.wake()
        # After the launches, so that a trial waiting for a slot does not also wait for this query; and a read
        # first, so that the usual tick with nobody to release takes no write lock.
        with self.read() as s:
            if not scheduler.idle_trials(s):
                return
        with self.write() as s:
            for trial in scheduler.release_idle_trials(s):
                logger.info("trial %s: waiting for the search method; its slot goes to a trial with work", trial.id)

    def _drain(self) -> None:
        """Master shutdown: preempt every run, wait for them to checkpoint and exit, then kill leftovers."""
        assert self.rm is not None
        if self.tasks is not None:
            self.tasks.stop_all()
        with self.write() as s:
            for trial in s.scalars(select(Trial).where(Trial.allocation_id.is_not(None))):
                trial.preempt_requested = True
        deadline = time.monotonic() + self._stop_timeout
        while self.rm.running() and time.monotonic() < deadline:
            self._reap(master_stopping=True)
            time.sleep(0.05)
        self.rm.kill_all()
        while self.rm.running():
            self._reap(master_stopping=True)
            time.sleep(0.05)
        if self._unrecorded_exits:  # left by a tick whose budget was spent
            self._reap(master_stopping=True)

    # ------------------------------------------------------------ helpers for the API

    @property
    def cluster_id(self) -> str:
        """A stable identifier of this master's cluster (its data dir's), given to trials as DET_CLUSTER_ID."""
        return hashlib.sha1(str(self.data_dir).encode()).hexdigest()[:16]

    def storage_problems(self, checkpoint_storage: Optional[Dict[str, Any]]) -> List[str]:
        """Why an experiment may not use this checkpoint storage on this master (empty: it may)."""
        if self.storage_roots is None:
            return []
        return (storage_roots_mod.storage_problems(checkpoint_storage, self.storage_roots, self.data_dir)
                + storage_endpoints_mod.endpoint_problems(checkpoint_storage, self.storage_endpoints))

    def storage_refusal(self, checkpoint_storage: Optional[Dict[str, Any]]) -> Optional[str]:
        """Why nothing may be deleted from this checkpoint storage now (a link planted since submission), or None."""
        problems = self.storage_problems(checkpoint_storage)
        return "; ".join(problems) if problems else None

    def total_slots(self) -> Optional[int]:
        return self.rm.total_slots if self.rm is not None else None

    def running_allocations(self) -> List[str]:
        return list(self.rm.running()) if self.rm is not None else []
