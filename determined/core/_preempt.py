"""Knowing when the trial must checkpoint and exit."""
import logging
import signal
import threading
import time
from typing import Any, Optional

from determined.common.api import Session
from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")

POLL_INTERVAL_S = 1.0


class PreemptContext:
    """`should_preempt()` turns true when the master asks the trial to stop (pause, cancel, shutdown)
    or when the process received SIGTERM.

    The master is asked at most once per `poll_interval` seconds; in between the last answer is reused,
    so a controller can call it every batch. In a multi-process trial the chief decides and broadcasts
    its answer, so every rank must call it at the same points.
    """

    def __init__(
        self,
        session: Optional[Session],
        allocation_id: str,
        distributed: Optional[DistributedContext] = None,
        *,
        watch_sigterm: bool = False,
        poll_interval: float = POLL_INTERVAL_S,
    ) -> None:
        self._session = session
        self._allocation_id = allocation_id
        self._distributed = distributed or DistributedContext()
        self._poll_interval = poll_interval
        self._preempted = False
        self._sigterm = False
        self._last_poll = float("-inf")
        self._previous_handler: Any = None
        self._handler_installed = False
        if watch_sigterm:
            self._install_sigterm_handler()

    def should_preempt(self) -> bool:
        """Whether the trial should checkpoint and exit now."""
        if self._distributed.size == 1:
            return self._chief_should_preempt()
        decision = self._chief_should_preempt() if self._distributed.rank == 0 else None
        return bool(self._distributed.broadcast(decision))

    def _chief_should_preempt(self) -> bool:
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
