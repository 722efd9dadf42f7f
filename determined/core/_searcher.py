"""The searcher operations a trial works through: train to a length, then report a metric."""
import logging
import math
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext
from determined.core._preempt import PreemptContext

logger = logging.getLogger("determined.core")

WAIT_POLL_S = 0.5


class SearcherOperation:
    """Train until `length` batches in total (since the trial started), validate, then `report_completed`."""

    def __init__(self, searcher: "SearcherContext", length: int, is_chief: bool = True) -> None:
        self._searcher = searcher
        self.length = int(length)
        self._is_chief = is_chief
        self._completed = False
        self.progress = 0

    def __repr__(self) -> str:
        return f"SearcherOperation(length={self.length}, completed={self._completed})"

    @property
    def completed(self) -> bool:
        return self._completed

    def report_progress(self, length: int) -> None:
        """Record how many batches of this operation are done (shown in logs; the master needs no call)."""
        self.progress = int(length)

    def report_completed(self, searcher_metric: float) -> None:
        """Finish the operation with the value of the searcher metric after validating at `length`."""
        if self._completed:
            raise errors.DeterminedError(f"{self!r} was already reported completed")
        try:
            value = float(searcher_metric)
        except (TypeError, ValueError):
            raise errors.DeterminedError(
                f"report_completed needs the searcher metric as a number, got {searcher_metric!r}"
            ) from None
        if not math.isfinite(value):
            raise errors.DeterminedError(
                f"report_completed got a searcher metric of {value}; the searcher needs a finite number"
            )
        self._completed = True
        if self._is_chief:
            self._searcher._report_completed(self.length, value)


class SearcherContext:
    """Yields the trial's searcher operations: pulled from the master, or taken from a fixed list locally.

    On the master, `{"wait": true}` answers are re-polled (stopping early when the trial is preempted),
    and `{"completed": true}` ends the iteration. In a multi-process trial the chief pulls and
    broadcasts each operation, so every rank must iterate.
    """

    def __init__(
        self,
        session: Optional[Session],
        trial_id: int,
        distributed: DistributedContext,
        preempt: PreemptContext,
        local_lengths: Optional[Sequence[int]] = None,
        wait_poll_s: float = WAIT_POLL_S,
    ) -> None:
        if session is None and local_lengths is None:
            raise errors.DeterminedError("a SearcherContext without a master needs a list of operation lengths")
        self._session = session
        self._trial_id = trial_id
        self._distributed = distributed
        self._preempt = preempt
        self._local_lengths = [int(x) for x in local_lengths] if local_lengths is not None else None
        self._wait_poll_s = wait_poll_s
        self.completed_operations: List[Dict[str, Any]] = []

    def operations(self) -> Iterator[SearcherOperation]:
        """The operations to work on, one at a time; each must be reported completed before the next."""
        is_chief = self._distributed.rank == 0
        local_index = 0
        while True:
            length: Optional[int] = None
            if is_chief:
                if self._local_lengths is not None:
                    if local_index < len(self._local_lengths) and not self._preempt._chief_should_preempt():
                        length = self._local_lengths[local_index]
                        local_index += 1
                else:
                    length = self._next_remote_length()
            if self._distributed.size > 1:
                length = self._distributed.broadcast(length)
            if length is None:
                return
            op = SearcherOperation(self, length, is_chief=is_chief)
            yield op
            if not op.completed:
                if self._preempt.should_preempt():
                    return
                raise errors.DeterminedError(
                    f"{op!r} was not reported completed: call op.report_completed(searcher_metric) after "
                    "training to op.length batches and validating, before asking for the next operation"
                )

    def _next_remote_length(self) -> Optional[int]:
        assert self._session is not None
        while True:
            if self._preempt._chief_should_preempt():
                return None
            answer = self._session.get(f"/trials/{self._trial_id}/searcher/operation") or {}
            if answer.get("completed"):
                return None
            if answer.get("wait"):
                time.sleep(self._wait_poll_s)
                continue
            if "length" in answer:
                return int(answer["length"])
            raise errors.DeterminedError(f"unexpected answer from the master's searcher/operation route: {answer!r}")

    def _report_completed(self, length: int, metric: float) -> None:
        record = {"length": length, "metric": metric}
        self.completed_operations.append(record)
        if self._session is None:
            logger.info("searcher operation completed: length %d, metric %s", length, metric)
            return
        self._session.post(f"/trials/{self._trial_id}/searcher/completed_operation", json=record)
