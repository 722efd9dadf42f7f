"""Log policies (``log_policies``): a trial's log lines matched against its experiment's regular expressions.

The resource manager's log sink passes every line of a run through ``LogPolicyMonitor.check`` (in the RM's own
threads, without the database). The first match of each policy in a run is kept in memory and written to the
trial (``Trial.log_policy_matches``) by the scheduler thread, in ``record`` (every tick) and, at the latest, in
the transaction that handles the run's exit, before its restart is decided (see allocations.py):

* every match labels the trial (``log_policy_matched`` in its JSON is the name of the latest);
* ``cancel_retries``: when that run fails, the trial is not restarted;
* ``exclude_node``: recorded with the node (one node here; the local resource manager has no other to avoid).
"""
import dataclasses
import logging
import re
import socket
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Pattern, Tuple

from sqlalchemy.orm import Session

from determined.config import active_log_policies
from determined.master.db import Trial

logger = logging.getLogger("determined.master")

MAX_LINE_KEPT = 500  # characters of the matching line stored with a match
MAX_MATCHES_PER_TRIAL = 100
LogSink = Callable[..., None]


@dataclasses.dataclass
class _Watch:
    allocation_id: str
    policies: List[Tuple[Dict[str, Any], Pattern[str]]]
    matched: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # policy key -> match


def _key(policy: Mapping[str, Any]) -> str:
    return str(policy.get("name") or f"{policy.get('action')}:{policy.get('pattern')}")


class LogPolicyMonitor:
    """The log policies of the running runs, and the matches not yet written to their trials."""

    def __init__(self, node: Optional[str] = None) -> None:
        self.node = node or socket.gethostname()
        self._lock = threading.Lock()
        self._watches: Dict[int, _Watch] = {}
        self._pending: Dict[int, List[Dict[str, Any]]] = {}

    def watch(self, trial_id: int, allocation_id: str, config: Mapping[str, Any]) -> None:
        """Match the lines of this run of the trial against the experiment's policies from now on."""
        policies = []
        for policy in active_log_policies(config):
            try:
                policies.append((policy, re.compile(policy["pattern"])))
            except re.error as e:  # checked when the config was loaded; a config stored before may still hold one
                logger.warning("trial %s: log policy %r has an invalid pattern: %s", trial_id, _key(policy), e)
        with self._lock:
            self._watches[trial_id] = _Watch(allocation_id, policies)

    def check(self, trial_id: int, message: str) -> None:
        """Match one log line of the trial (called from the resource manager's threads)."""
        watch = self._watches.get(trial_id)
        if watch is None or not watch.policies:
            return
        for policy, pattern in watch.policies:
            key = _key(policy)
            if key in watch.matched or pattern.search(message) is None:
                continue
            match = {"name": policy.get("name"), "action": policy.get("action"), "allocation_id": watch.allocation_id,
                     "node": self.node, "line": message[:MAX_LINE_KEPT]}
            with self._lock:
                if key in watch.matched:
                    continue
                watch.matched[key] = match
                self._pending.setdefault(trial_id, []).append(match)

    def wrap(self, sink: LogSink) -> LogSink:
        """A log sink that checks every line, then passes it on to `sink`."""
        def monitored(trial_id: int, timestamp: Any, stream: str, message: str) -> None:
            self.check(trial_id, message)
            sink(trial_id, timestamp, stream, message)

        return monitored

    def has_pending(self) -> bool:
        return bool(self._pending)

    def record(self, s: Session, trial_ids: Optional[List[int]] = None) -> None:
        """Write the pending matches (of `trial_ids`, or all) to their trials."""
        with self._lock:
            ids = list(self._pending) if trial_ids is None else [t for t in trial_ids if t in self._pending]
            pending = {t: self._pending.pop(t) for t in ids}
        for trial_id, matches in pending.items():
            trial = s.get(Trial, trial_id)
            if trial is None:
                continue
            kept = list(trial.log_policy_matches or [])
            room = max(0, MAX_MATCHES_PER_TRIAL - len(kept))
            trial.log_policy_matches = kept + matches[:room]
            for match in matches:
                logger.warning("trial %s: log policy %r matched a log line%s: %s", trial_id,
                               match["name"] or match["action"],
                               f" ({match['action']})" if match["action"] else "", match["line"][:200])

    def forget(self, trial_id: int, allocation_id: str) -> None:
        """The run ended: stop watching it (its matches stay pending until recorded)."""
        with self._lock:
            watch = self._watches.get(trial_id)
            if watch is not None and watch.allocation_id == allocation_id:
                del self._watches[trial_id]


def cancels_retries(trial: Trial, allocation_id: str) -> Optional[Dict[str, Any]]:
    """The `cancel_retries` match of this run of the trial, if its logs had one."""
    for match in trial.log_policy_matches or []:
        if match.get("action") == "cancel_retries" and match.get("allocation_id") == allocation_id:
            return dict(match)
    return None

