"""Knowing when the trial must checkpoint and exit."""
import enum
import logging
import signal
import threading
import time
from typing import Any, Optional

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")

POLL_INTERVAL_S = 1.0


class PreemptMode(enum.Enum):
    """How the ranks of a trial learn about preemption (Determined 0.38's `core.PreemptMode`).

    `WorkersAskChief` (default): every rank calls `should_preempt()` at the same points; the chief asks the
    master and broadcasts its answer. `ChiefOnly`: only the chief may call it. `WorkersAskMaster`: each rank
    asks the master on its own (no collective).
    """

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class PreemptContext:
    """`should_preempt()` turns true when the master asks the trial to stop (pause, cancel, a stop by the
    searcher, master shutdown) or when the process received SIGTERM.

    The master is asked at most once per `poll_interval` seconds; in between the last answer is reused,
    so a controller can call it every batch. The first true answer is acknowledged to the master
    (`auto_ack`), which tells it the trial will checkpoint and exit to be resumed later (Determined 0.38: an
    exit 0 without the acknowledgement means the trial is done). Without a master it is always false.
    """

    def __init__(
        self,
        session: Optional[Session],
        allocation_id: str,
        distributed: Optional[DistributedContext] = None,
        *,
        watch_sigterm: bool = False,
        poll_interval: float = POLL_INTERVAL_S,
        mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._session = session
        self._allocation_id = allocation_id
        self._distributed = distributed or DistributedContext()
        self._poll_interval = poll_interval
        self._mode = PreemptMode(mode)
        self._preempted = False
        self._sigterm = False
        self._acknowledged = False
        self._last_poll = float("-inf")
        self._previous_handler: Any = None
        self._handler_installed = False
        if watch_sigterm:
            self._install_sigterm_handler()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Whether the trial should checkpoint and exit now.

        With the default mode every rank must call it at the same points (the chief's answer is broadcast).
        `auto_ack`: acknowledge the first true answer to the master (see `acknowledge_preemption_signal`).
        """
        if self._mode == PreemptMode.ChiefOnly and self._distributed.rank != 0:
            raise errors.DeterminedError(
                "should_preempt() was called on a worker (rank "
                f"{self._distributed.rank}) but core.init(preempt_mode=PreemptMode.ChiefOnly) lets only the chief "
                "call it: use PreemptMode.WorkersAskChief or WorkersAskMaster"
            )
        if self._distributed.size == 1 or self._mode != PreemptMode.WorkersAskChief:
            decision = self._poll()
        else:
            local = self._poll() if self._distributed.rank == 0 else None
            decision = bool(self._distributed.broadcast(local))
        if decision and auto_ack:
            self.acknowledge_preemption_signal()
        return decision

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master this run will checkpoint and exit because it was asked to, so that its exit 0 means
        "resume me later" rather than "done". `should_preempt()` does it by default; once per run is enough."""
        if self._acknowledged or self._session is None or self._distributed.rank != 0:
            return
        self._acknowledged = True
        try:
            self._session.post(f"/allocations/{self._allocation_id}/signals/ack_preemption", json={})
        except Exception as e:  # the exit that follows is handled either way; the next report says if it is gone
            logger.warning("could not acknowledge the preemption signal: %s", e)

    def _chief_should_preempt(self) -> bool:
        """The chief's answer, acknowledged when true (for the platform's own loops, which then always stop)."""
        decision = self._poll()
        if decision:
            self.acknowledge_preemption_signal()
        return decision

    def _answered(self, preempt: Any, at: Optional[float] = None) -> None:
        """The master answered the preemption question inside another answer (the run's context, a completed
        operation) at `at` (time.monotonic(); default now): the next poll waits a poll interval from then."""
        if self._session is None or not isinstance(preempt, bool):
            return
        at = time.monotonic() if at is None else at
        if at > self._last_poll:
            self._last_poll = at
        if preempt and not self._preempted:
            logger.info("the master asked this trial to stop; it will checkpoint and exit")
            self._preempted = True

    def _poll(self) -> bool:
        if self._preempted or self._sigterm:
            return True
        if self._session is None:
            return False
        now = time.monotonic()
        if now - self._last_poll < self._poll_interval:
            return False
        self._last_poll = now
        try:
            answer = self._session.get(f"/allocations/{self._allocation_id}/signals/preemption") or {}
        except Exception as e:  # an unreachable master is handled by the next report, not here
            logger.warning("could not ask the master about preemption: %s", e)
            return False
        if answer.get("preempt"):
            logger.info("the master asked this trial to stop; it will checkpoint and exit")
            self._preempted = True
        return self._preempted

    def close(self) -> None:
        if self._handler_installed:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._handler_installed = False

    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            if self._sigterm:
                # A second SIGTERM means "now": fall back to the default behaviour.
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGTERM)
                return
            logger.info("SIGTERM received; the trial will checkpoint and exit")
            self._sigterm = True

        self._previous_handler = signal.signal(signal.SIGTERM, on_sigterm)
        self._handler_installed = True
