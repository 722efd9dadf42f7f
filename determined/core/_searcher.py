"""The searcher operations a trial works through: train to a length, then report a metric.

Three kinds of `SearcherContext`:

* a search that tells trials how long to train (Determined 0.37 and before: ASHA with max_length, PBT...): the
  operations come from the master, one after the other, each reported completed with the searcher metric;
* a trial that runs its own loop (Determined 0.38: ASHA with time_metric, single/random/grid): exactly one
  operation of `searcher.max_length` (the integer, its unit dropped) whose `report_completed` sends nothing; without
  `searcher.max_length` there is none, and `SearcherContextMissing` says so on every call;
* without a master: the operations of a given list of lengths (0.38's off-cluster default: one operation of 1).
"""
import enum
import json
import logging
import math
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from determined import errors
from determined.common.api import Session
from determined.config import length_to_batches, searcher_drives_trials
from determined.core._distributed import DistributedContext
from determined.core._preempt import PreemptContext

logger = logging.getLogger("determined.core")

WAIT_POLL_S = 0.5
PROGRESS_STEP = 0.01  # a trial's progress is sent to the master when it moved by at least this much


class SearcherMode(enum.Enum):
    """Who asks for operations: every rank (the chief's are broadcast), or only the chief (Determined's spelling)."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHEIF_ONLY"


class Unit(enum.Enum):
    """The unit of `searcher.max_length` (`get_configured_units()`)."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherOperation:
    """Train until `length` in total (since the trial started; in the unit of `searcher.max_length`), validate,
    then `report_completed(searcher_metric)`."""

    def __init__(self, searcher: "SearcherContext", length: int, is_chief: bool = True,
                 *, batches: Optional[int] = None) -> None:
        self._searcher = searcher
        self.length = int(length)
        self._is_chief = is_chief
        self._completed = False
        self._given_batches = batches
        self.progress = 0

    def __repr__(self) -> str:
        return f"SearcherOperation(length={self.length}, completed={self._completed})"

    @property
    def completed(self) -> bool:
        return self._completed

    @property
    def _batches(self) -> int:
        """The length in batches, what the platform's own training loops count."""
        if self._given_batches is None:
            self._given_batches = self._searcher._length_in_batches()
        return self._given_batches

    def report_progress(self, length: float) -> None:
        """How much of the operation is done, in its unit (the chief's report moves the trial's progress)."""
        self.progress = length
        if self._is_chief and self.length > 0:
            self._searcher._report_progress(min(1.0, max(0.0, float(length) / self.length)))

    def _report_batches(self, batches: int) -> None:
        """`report_progress` in batches (the platform's loops count batches whatever the unit of max_length)."""
        self.progress = batches
        if self._is_chief and self._batches > 0:
            self._searcher._report_progress(min(1.0, batches / self._batches))

    def report_completed(self, searcher_metric: Any) -> None:
        """Finish the operation with the value of the searcher metric after validating at `length`.

        A custom search (`searcher.name: custom`, Determined 0.23+) takes any JSON value (a dict of metrics, say):
        its search method gets it as it is."""
        if self._completed:
            raise errors.DeterminedError(f"{self!r} was already reported completed")
        value: Any
        if self._searcher._is_custom() and isinstance(searcher_metric, (dict, list, str)):
            value = _json_metric(searcher_metric)
        else:
            try:
                value = float(searcher_metric)
            except (TypeError, ValueError):
                raise errors.DeterminedError(
                    f"report_completed needs the searcher metric as a number, got {searcher_metric!r} (only a "
                    "custom search takes a JSON value)"
                ) from None
            if not math.isfinite(value):
                raise errors.DeterminedError(
                    f"report_completed got a searcher metric of {value}; the searcher needs a finite number"
                )
        self._completed = True
        if self._is_chief:
            self._searcher._report_completed(self.length, self._given_batches, value)


def _json_metric(value: Any) -> Any:
    """`value` as JSON would carry it (numpy numbers become floats); an error naming what cannot be sent."""
    try:
        return json.loads(json.dumps(value, default=_plain_number, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise errors.DeterminedError(f"report_completed: the searcher metric {value!r} is not JSON ({e})") from None


def _plain_number(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _definite(answer: Any) -> Optional[Dict[str, Any]]:
    """A `searcher/operation` answer that says what to do (an operation, or no more), else None (ask again)."""
    if isinstance(answer, dict) and ("length" in answer or answer.get("completed")):
        return answer
    return None


class SearcherContext:
    """Yields the trial's searcher operations (see the module). In a multi-process trial the chief gets each
    operation and broadcasts it, so every rank must iterate (or, with `SearcherMode.ChiefOnly`, only the chief)."""

    def __init__(
        self,
        session: Optional[Session],
        trial_id: int,
        distributed: DistributedContext,
        preempt: PreemptContext,
        local_lengths: Optional[Sequence[int]] = None,
        wait_poll_s: float = WAIT_POLL_S,
        *,
        config: Optional[Dict[str, Any]] = None,
        hparams: Optional[Dict[str, Any]] = None,
        next_answer: Optional[Dict[str, Any]] = None,
    ) -> None:
        """`next_answer`: the master's answer to the next `searcher/operation` request, when the caller already has
        it (the context the run started with carries it)."""
        if session is None and local_lengths is None:
            raise errors.DeterminedError("a SearcherContext without a master needs a list of operation lengths")
        self._session = session
        self._trial_id = trial_id
        self._distributed = distributed
        self._preempt = preempt
        self._local_lengths = [int(x) for x in local_lengths] if local_lengths is not None else None
        self._wait_poll_s = wait_poll_s
        self._config = dict(config or {})
        self._hparams = dict(hparams or {})
        searcher = self._config.get("searcher") or {}
        self._max_length = searcher.get("max_length")
        self._own_loop = session is not None and bool(searcher) and not searcher_drives_trials(searcher)
        self._sent_progress = -1.0
        self.completed_operations: List[Dict[str, Any]] = []
        # The master's answer to the next operation request when a previous answer already carried it. Only a
        # definite one is kept (an operation, or no more operations): a pending operation stays the trial's
        # until the trial completes it, and a closed trial stays closed, so it cannot be out of date.
        self._next_answer = _definite(next_answer)

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """The operations to work on, one at a time; each must be reported completed (by the chief) before the next.

        `auto_ack` is kept for Determined's signature: running out of operations needs no acknowledgement here.
        """
        is_chief = self._distributed.rank == 0
        if SearcherMode(searcher_mode) == SearcherMode.ChiefOnly and not is_chief:
            raise errors.DeterminedError(
                f"searcher.operations(searcher_mode=SearcherMode.ChiefOnly) was called on rank "
                f"{self._distributed.rank}; with ChiefOnly only the chief iterates (or use WorkersAskChief)"
            )
        broadcast = self._distributed.size > 1 and SearcherMode(searcher_mode) == SearcherMode.WorkersAskChief
        local_index = 0
        previous: Optional[SearcherOperation] = None
        while True:
            answer: Optional[Dict[str, Any]] = None
            if is_chief and previous is not None and not previous.completed:
                # Only the chief reports operations completed (Determined 0.26/0.38), so only the chief checks; its
                # answer (None: no more operations) reaches the workers through the usual broadcast below.
                # Preempted in the middle of the operation: no more operations. Else the chief forgot to report.
                preempted = self._preempt._poll()
                if preempted and auto_ack:
                    self._preempt.acknowledge_preemption_signal()
                if not preempted:
                    raise errors.DeterminedError(
                        f"{previous!r} was not reported completed: call op.report_completed(searcher_metric) "
                        "after training to op.length and validating, before asking for the next operation"
                    )
            elif is_chief:
                if self._local_lengths is not None:
                    if local_index < len(self._local_lengths) and not self._preempt._chief_should_preempt():
                        answer = {"length": self._local_lengths[local_index]}
                        local_index += 1
                elif self._own_loop:
                    answer = {"searcher_length": self._own_loop_length()} if local_index == 0 else None
                    local_index += 1
                else:
                    answer = self._next_remote_operation()
            if broadcast:
                answer = self._distributed.broadcast(answer)
            if answer is None:
                return
            length = answer.get("searcher_length", answer.get("length"))
            op = SearcherOperation(self, length, is_chief=is_chief, batches=answer.get("length"))
            yield op
            previous = op

    def acknowledge_out_of_ops(self) -> None:
        """Nothing to do: a trial that ran out of operations just exits (kept for Determined's API)."""

    def get_configured_units(self) -> Optional[Unit]:
        """The unit of `searcher.max_length` (None when it has none)."""
        if isinstance(self._max_length, dict) and len(self._max_length) == 1:
            return Unit[next(iter(self._max_length)).upper()]
        return None

    # -- internals -----------------------------------------------------------------------------------

    def _own_loop_length(self) -> int:
        if not isinstance(self._max_length, dict) or len(self._max_length) != 1:
            raise errors.DeterminedError(
                "searcher.operations() needs searcher.max_length in the experiment config: give max_length, or "
                "let the training loop decide its own length (Determined 0.38)"
            )
        return int(next(iter(self._max_length.values())))

    def _length_in_batches(self) -> int:
        if self._local_lengths is not None or not isinstance(self._max_length, dict):
            raise errors.DeterminedError("this searcher operation has no length in batches")
        gbs = self._hparams.get("global_batch_size") or 0
        return int(length_to_batches(self._max_length, gbs, int(self._config.get("records_per_epoch") or 0)))

    def _next_remote_operation(self) -> Optional[Dict[str, Any]]:
        assert self._session is not None
        while True:
            if self._preempt._chief_should_preempt():
                return None
            answer, self._next_answer = self._next_answer, None
            if answer is None:
                answer = self._session.get(f"/trials/{self._trial_id}/searcher/operation") or {}
            if answer.get("completed"):
                return None
            if answer.get("wait"):
                time.sleep(self._wait_poll_s)
                continue
            if "length" in answer:
                return {k: int(v) for k, v in answer.items() if k in ("length", "searcher_length")}
            raise errors.DeterminedError(f"unexpected answer from the master's searcher/operation route: {answer!r}")

    def _report_progress(self, fraction: float) -> None:
        if self._session is None or not self._own_loop:
            return  # the search method follows a searcher-driven trial through its validations
        if fraction - self._sent_progress < PROGRESS_STEP and not (fraction >= 1.0 > self._sent_progress):
            return
        self._sent_progress = fraction
        self._session.post(f"/trials/{self._trial_id}/progress", json={"progress": fraction})

    def _is_custom(self) -> bool:
        return (self._config.get("searcher") or {}).get("name") == "custom"

    def _report_completed(self, length: int, batches: Optional[int], metric: Any) -> None:
        record = {"length": length, "metric": metric}
        self.completed_operations.append(record)
        if self._session is None:
            logger.info("searcher operation completed: length %d, metric %s", length, metric)
            return
        if self._own_loop:
            return  # Determined 0.38: the search method follows the validation metrics; nothing is sent
        # The master's operation is in batches (`length` of its answer).
        answer = self._session.post(f"/trials/{self._trial_id}/searcher/completed_operation",
                                    json={"length": batches if batches is not None else length, "metric": metric})
        if isinstance(answer, dict):  # what the trial asks next, answered already
            self._next_answer = _definite(answer.get("next_operation"))
            if "preempt" in answer and self._distributed.rank == 0:
                self._preempt._answered(answer["preempt"])


class SearcherUnavailable(errors.InvalidTrialError, ValueError):
    """core_context.searcher was used in a trial whose config has no searcher.max_length (a ValueError, as 0.38).
    Every run would fail the same way: the trial is not restarted."""


class SearcherContextMissing(SearcherContext):
    """The searcher of a trial whose config has no `searcher.max_length` (Determined 0.38): there are no operations;
    every method says so. The training loop decides its length; report progress with `train.report_progress`."""

    def __init__(self) -> None:  # noqa: D107 -- nothing to keep
        pass

    def _missing(self) -> SearcherUnavailable:
        return SearcherUnavailable(
            "core_context.searcher is not available: the experiment config has no searcher.max_length, so the "
            "search gives no operations (Determined 0.38). Train for the length your code decides, report "
            "validation metrics (with searcher.time_metric for adaptive_asha) and progress with "
            "core_context.train.report_progress(); or set searcher.max_length"
        )

    def operations(self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief,
                   auto_ack: bool = True) -> Iterator[SearcherOperation]:
        raise self._missing()

    def acknowledge_out_of_ops(self) -> None:
        raise self._missing()

    def get_configured_units(self) -> Optional[Unit]:
        raise self._missing()
