"""What a trial is doing, in words a researcher reads: RUNNING, QUEUED, WAITING (for the search method),
PAUSED, STOPPING, COMPLETED, STOPPED (closed early by the search method), CANCELED or ERROR, with the reason.

A trial's stored `state` is Determined's (ACTIVE for a trial that runs, waits for a slot or waits for a
promotion alike); its status is derived from the stored run, the searcher operations and the validations,
in portable SQL (determined/master/views/dbread.py), so the master and the CLI's local reads say the same.
"""
import logging
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from determined.master.views.dbread import Reader, in_list

logger = logging.getLogger("determined.master")

RUNNING = "RUNNING"
QUEUED = "QUEUED"
WAITING = "WAITING"
PAUSED = "PAUSED"
STOPPING = "STOPPING"
COMPLETED = "COMPLETED"
STOPPED = "STOPPED"
CANCELED = "CANCELED"
ERROR = "ERROR"

STATUSES = (RUNNING, QUEUED, WAITING, PAUSED, STOPPING, COMPLETED, STOPPED, CANCELED, ERROR)
_HALVING = ("adaptive_asha", "async_halving", "adaptive", "adaptive_simple", "sync_halving")


class _Ops:
    """One trial's searcher operations: lengths in the searcher's unit."""

    def __init__(self) -> None:
        self.pending: List[Tuple[int, int]] = []  # (length, length_batches), oldest first
        self.completed: List[int] = []  # lengths reached


def _searcher_facts(config: Mapping[str, Any]) -> Tuple[str, str, Optional[int], str, bool]:
    """(name, unit, full length a trial trains when it is never stopped early, metric, smaller_is_better)."""
    searcher = config.get("searcher") or {}
    name = str(searcher.get("name") or "")
    full: Optional[int] = None
    unit = "batches"
    length = searcher.get("max_length")
    if name == "pbt":
        length = searcher.get("length_per_round")
    if isinstance(length, Mapping) and len(length) == 1:
        ((unit, value),) = length.items()
        if isinstance(value, int):
            full = value * int(searcher.get("num_rounds") or 1) if name == "pbt" else value
    return name, str(unit), full, str(searcher.get("metric") or ""), bool(searcher.get("smaller_is_better", True))


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _fmt(value: Optional[float]) -> str:
    return "none" if value is None else f"{value:.5g}"


# Where experiment.py keeps, in the searcher snapshot, the message of a search that stopped with an error.
SHUTDOWN_MESSAGE = "shutdown_message"
# Where experiment.py keeps, in the searcher snapshot, what the search method recorded when it closed each trial
# (`keep_stop_reasons`): {request id: [kind, text]}, kind "stopped" (before the full length) or "top" (at the top
# rung). A read says why from it without importing or restoring the search method.
STOP_REASONS = "stop_reasons"
STOPPED_EARLY, REACHED_TOP = "stopped", "top"


def _search_method(exp: Any) -> Optional[Any]:
    """The experiment's search method as its snapshot left it (what it decided, in its own brackets and rungs);
    None when there is none to read."""
    snapshot = getattr(exp, "searcher_snapshot", None)
    config = exp.config or {}
    if not isinstance(snapshot, Mapping) or not isinstance(snapshot.get("method"), Mapping) or not config.get("searcher"):
        return None
    try:
        from determined import searcher  # the search methods: only for a reason that needs them (not a list's)

        method = searcher.make_search_method(config["searcher"])
        method.restore(dict(snapshot["method"]))
        return method
    except Exception as e:  # an old or foreign snapshot: the reasons say less, never something untrue
        logger.debug("experiment %s: the search method's state cannot be read (%s)", exp.id, e)
        return None


def recorded_reason(method: Any, metric: str, request_id: str, unit: str) -> Optional[Tuple[str, str]]:
    """(kind, text) of what the search method `method` recorded when it closed the trial `request_id` (its own
    bracket's and rung's facts): STOPPED_EARLY with the stop reason, or REACHED_TOP; None when it recorded nothing
    (it did not stop the trial, or the method records no facts: random, grid, custom)."""
    from determined import searcher

    facts = searcher.stop_facts(method, request_id)
    if facts is None:
        return None
    unit = str(getattr(method, "unit", unit))
    if facts.get("rule") == "top":
        return REACHED_TOP, f"reached the top rung ({facts['length']} {unit}) and was done"
    return STOPPED_EARLY, searcher.stop_reason(facts, metric, unit)


def keep_stop_reasons(snapshot: Dict[str, Any], previous: Optional[Mapping[str, Any]], method: Any,
                      config: Mapping[str, Any], closed: Iterable[str]) -> None:
    """Into the search method's new `snapshot`: the reasons stored in `previous` (the experiment's snapshot before)
    and those of the trials it closed since (`closed`: request ids), computed now, while the method is at hand, so
    that a read (`det e describe`, the UI, the logs) only reads them. An experiment whose snapshot is from before
    reasons were kept gets none: its reads restore the method (`_search_method`)."""
    if isinstance(previous, Mapping) and not isinstance(previous.get(STOP_REASONS), Mapping):
        return
    reasons = dict(previous[STOP_REASONS]) if isinstance(previous, Mapping) else {}
    _, unit, _, metric, _ = _searcher_facts(config)
    inner = getattr(method, "method", method)  # a Searcher holds its search method
    for request_id in closed:
        entry = recorded_reason(inner, metric, str(request_id), unit)
        if entry is not None:
            reasons[str(request_id)] = list(entry)
    snapshot[STOP_REASONS] = reasons


def shutdown_message(exp: Any) -> Optional[str]:
    snapshot = getattr(exp, "searcher_snapshot", None)
    message = snapshot.get(SHUTDOWN_MESSAGE) if isinstance(snapshot, Mapping) else None
    return str(message) if message else None


class _Experiment:
    """What the reasons of one experiment's trials need: operations and validated metrics per trial."""

    def __init__(self, db: Reader, exp: Any, trial_ids: Optional[Sequence[int]] = None) -> None:
        """All the experiment's trials, or (`trial_ids`) only those, plus what a cutoff needs when it is asked
        (`_others_at`): a trial that ends in a search of thousands reads its own rows, not every trial's."""
        self.exp = exp
        self.db = db
        self.name, self.unit, self.full, self.metric, self.smaller = _searcher_facts(exp.config or {})
        self.ops: Dict[int, _Ops] = {}
        self.metric_at: Dict[Tuple[int, int], Optional[float]] = {}  # (trial, length) -> searcher metric there
        self._complete = trial_ids is None
        self._lengths_read: Set[int] = set()
        self._method: Any = False  # read on first use
        self._imported: Any = False  # read on first use
        if trial_ids is None:
            self._read("trial_id IN (SELECT id FROM trials WHERE experiment_id = :e)", e=exp.id)
        else:
            names, params = in_list("t", list(trial_ids))
            self._read(f"trial_id IN {names}", **params)

    def _read(self, where: str, **params: Any) -> None:
        """The operations of the trials `where` selects, and their searcher metric at each completed length."""
        for r in self.db.rows(f"SELECT trial_id, length, length_batches, completed FROM searcher_operations "
                              f"WHERE {where} ORDER BY id", **params):
            ops = self.ops.setdefault(r.trial_id, _Ops())
            if r.completed:
                ops.completed.append(int(r.length))
            else:
                ops.pending.append((int(r.length), int(r.length_batches)))
        for r in self.db.rows(f"SELECT o.trial_id, o.length, v.metrics FROM searcher_operations o "
                              f"JOIN validation_metrics v ON v.trial_id = o.trial_id AND v.steps_completed = o.length_batches "
                              f"WHERE o.completed AND o.{where} ORDER BY v.id", **params):
            self.metric_at[(r.trial_id, int(r.length))] = _number((r.metrics or {}).get(self.metric))

    def _others_at(self, length: int) -> None:
        """Make sure every trial that completed `length` is read (with all its operations)."""
        if self._complete or length in self._lengths_read:
            return
        self._lengths_read.add(length)
        others = [r.trial_id for r in self.db.rows(
            "SELECT DISTINCT trial_id FROM searcher_operations WHERE completed AND length = :l AND trial_id IN "
            "(SELECT id FROM trials WHERE experiment_id = :e)", l=length, e=self.exp.id) if r.trial_id not in self.ops]
        for start in range(0, len(others), 500):
            names, params = in_list("t", others[start:start + 500])
            self._read(f"trial_id IN {names}", **params)

    # ------------------------------------------------------------ words

    def _where(self, trial_id: int, length: int) -> str:
        """`rung 2 (8 batches)`, `round 3 (300 batches)` or `8 batches`."""
        amount = f"{length} {self.unit}"
        if self.name in _HALVING:
            reached = sorted(set(self.ops.get(trial_id, _Ops()).completed))
            return f"rung {reached.index(length) + 1} ({amount})" if length in reached else amount
        if self.name == "pbt" and self.full:
            per_round = self.full // max(1, int((self.exp.config.get("searcher") or {}).get("num_rounds") or 1))
            if per_round and length % per_round == 0:
                return f"round {length // per_round} ({amount})"
        return amount

    def method(self) -> Optional[Any]:
        if self._method is False:
            self._method = _search_method(self.exp)
        return self._method

    def recorded(self, trial: Any) -> Optional[Tuple[str, str]]:
        """What the search method recorded when it closed the trial (`recorded_reason`): as stored with its
        snapshot (`keep_stop_reasons`), or, for a snapshot from before they were stored, from the method restored."""
        request_id = getattr(trial, "request_id", None)
        if request_id is None:
            return None
        snapshot = getattr(self.exp, "searcher_snapshot", None)
        stored = snapshot.get(STOP_REASONS) if isinstance(snapshot, Mapping) else None
        if isinstance(stored, Mapping):
            entry = stored.get(str(request_id))
            if isinstance(entry, (list, tuple)) and len(entry) == 2:
                return str(entry[0]), str(entry[1])
            return None
        method = self.method()
        if method is None:
            return None
        return recorded_reason(method, self.metric, str(request_id), self.unit)

    def stopped_by_search_end(self, trial: Any) -> Optional[str]:
        """A trial the search method never stopped, closed because the search ended (the search shut down: it
        failed, or it needed no more trials) before the trial trained its full length."""
        if not (self.exp.searcher_shutdown and trial.close_requested):
            return None
        if self.exp.searcher_failure:
            message = shutdown_message(self.exp)
            return "stopped when the search stopped with an error" + (f": {message}" if message else "")
        return "stopped when the search ended: it needed no more trials"

    def stop_reason(self, trial: Any) -> Optional[str]:
        """Why the search method closed a trial before the full length, from its own bracket and rung."""
        recorded = self.recorded(trial)
        if recorded is not None and recorded[0] == STOPPED_EARLY:
            return recorded[1]
        ops = self.ops.get(trial.id)
        if ops is None or not ops.completed or self.full is None:
            from determined.config.entrypoint import runs_a_script

            if getattr(trial, "state", None) == "COMPLETED" and runs_a_script(self.exp.config or {}):
                return None  # a script's process that ended on its own (exit 0) before any operation: it says so
            return self.stopped_by_search_end(trial)
        last = max(ops.completed)
        if last >= self.full:
            return None
        ended = self.stopped_by_search_end(trial)
        if ended is not None:
            return ended
        if not trial.close_requested:
            return None  # it ended on its own (a script's process), not by the searcher
        # The search method recorded no facts (a snapshot from before they were kept): where, and its metric only.
        verb = "replaced" if self.name == "pbt" else "stopped"
        return f"{verb} by the searcher at {self._where(trial.id, last)}: {self.metric} {_fmt(self.metric_at.get((trial.id, last)))}"

    def waiting_reason(self, trial: Any) -> str:
        ops = self.ops.get(trial.id) or _Ops()
        reported = ""
        if ops.completed:
            last = max(ops.completed)
            reported = f": reported {self.metric} {_fmt(self.metric_at.get((trial.id, last)))} at {self._where(trial.id, last)}"
        if self.name in _HALVING:
            return "waiting for promotion" + reported
        if self.name == "pbt":
            return "waiting for the other members to finish the round" + reported
        return "waiting for the search method" + reported

    def imported_from(self) -> Optional[str]:
        """The Determined cluster the experiment was imported from (`det import determined`), or None. An imported
        experiment has no search method's state here (its search ended there); the import recorded where it came
        from."""
        if self._imported is False:
            self._imported = None
            exp = self.exp
            if getattr(exp, "searcher_snapshot", None) is None and getattr(exp, "searcher_shutdown", False):
                row = self.db.first("SELECT source FROM import_mappings WHERE kind = 'experiments' AND new_id = :e",
                                    e=str(exp.id))
                self._imported = str(row.source) if row is not None else None
        return self._imported

    def imported_reason(self, trial: Any) -> Optional[str]:
        """Why an imported trial that never ran here ended, in the words of its import: it ran on the source
        cluster, so nothing here (its process, its operations) says how it ended."""
        if trial.id in self.ops or getattr(trial, "allocation_id", None) is not None:
            return None
        source = self.imported_from()
        if source is None:
            return None
        batches = int(getattr(trial, "total_batches", 0) or 0)
        last = f"; its last report there was at batch {batches}" if batches else ""
        if trial.state == "COMPLETED":
            return f"imported from Determined (cluster {source}), where it COMPLETED{last}"
        runner = getattr(trial, "runner_status", None)
        said = f": {runner}" if runner else f", where it was {trial.state}"
        return f"imported from Determined (cluster {source}){said}{last}"

    def status(self, trial: Any) -> Tuple[str, Optional[str]]:
        state = trial.state
        running = trial.allocation_id is not None
        ops = self.ops.get(trial.id) or _Ops()
        config = self.exp.config or {}
        if state == "ACTIVE":
            if ops.pending:
                target = f"training to {ops.pending[0][1]} batches"
                if running:
                    return RUNNING, ("checkpointing to give its slot back; then " + target) if trial.preempt_requested \
                        else target
                if trial.runs:
                    return QUEUED, f"waiting for a slot to resume from batch {trial.total_batches}; then {target}"
                return QUEUED, "waiting for a slot; then " + target
            if trial.close_requested:
                return (RUNNING, "finishing") if running else (QUEUED, "waiting for a slot to finish")
            reason = self.waiting_reason(trial)
            if running:
                return WAITING, reason + ("; checkpointing to give its slot to a queued trial"
                                          if trial.preempt_requested else "; keeps its slot while no trial needs it")
            return WAITING, reason
        if state == "PAUSED":
            return (STOPPING, "checkpointing before it pauses") if running else (PAUSED, "its experiment is paused")
        if state in ("STOPPING_CANCELED", "STOPPING_KILLED"):
            return STOPPING, "being killed" if state == "STOPPING_KILLED" else "checkpointing before it is canceled"
        if state in ("COMPLETED", "CANCELED"):
            imported = self.imported_reason(trial)
            if imported is not None:
                return state, imported
        if state == "COMPLETED":
            reason = self.stop_reason(trial)
            if reason is not None:
                return STOPPED, reason
            recorded = self.recorded(trial)
            if recorded is not None and recorded[0] == REACHED_TOP:
                return COMPLETED, recorded[1]
            if self.full is not None:
                ops = self.ops.get(trial.id)
                reached = max(ops.completed) if ops is not None and ops.completed else 0
                if reached < self.full:  # a script's trial ends with its process (exit code 0), wherever it got
                    return COMPLETED, (f"its process ended after {trial.total_batches} batches, before the "
                                       f"{self.full} {self.unit} the searcher asked for")
                return COMPLETED, f"trained the full length ({self.full} {self.unit})"
            return COMPLETED, None
        if state == "ERROR":
            policies = [m for m in getattr(trial, "log_policy_matches", None) or [] if m.get("action") == "cancel_retries"]
            if policies:
                policy = policies[-1].get("name") or policies[-1].get("line")
                return ERROR, f"failed; log policy {policy!r} (cancel_retries) matched its logs, so it was not restarted"
            failures = trial.restarts + 1  # `restarts` counts the restarts that happened
            max_restarts = int(config.get("max_restarts", 5))
            message = shutdown_message(self.exp) if self.exp.searcher_failure else None
            if trial.restarts >= max_restarts:
                text = (f"failed {failures} time{'s' if failures != 1 else ''}, more than max_restarts "
                        f"({max_restarts}) allows; its logs show why")
            else:  # it did not use its restarts: it reported that it cannot succeed (a restart would fail the same way)
                restarted = f" after {trial.restarts} restart{'s' if trial.restarts != 1 else ''}" if trial.restarts else ""
                text = (f"failed{restarted} and was not restarted: it cannot succeed as written, a restart would fail "
                        f"the same way")
            return ERROR, text + (f"; the search stopped with an error: {message}" if message else
                                  ("" if trial.restarts >= max_restarts else "; its logs show why"))
        if state == "CANCELED":
            if self.exp.state in ("CANCELED", "STOPPING_CANCELED"):
                return CANCELED, "its experiment was canceled or killed"
            return CANCELED, "killed, or it exited early (an invalid hyperparameter, or a user's request)"
        return str(state), None


def statuses(db: Reader, exp: Any, trials: Sequence[Any]) -> Dict[int, Tuple[str, Optional[str]]]:
    """`{trial id: (status, reason)}` for trials of the experiment `exp` (rows or ORM objects); the cutoffs
    compare each trial with all the others of the experiment."""
    if not trials:
        return {}
    # A few trials (a trial that ended, one trial's page) read only theirs; a whole list reads the experiment once.
    view = _Experiment(db, exp, [t.id for t in trials] if len(trials) <= 50 else None)
    return {t.id: view.status(t) for t in trials}
