"""Reporting training and validation metrics."""
import logging
import math
import pathlib
from typing import Any, Dict, List, Optional

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext
from determined.core._metrics import clean_batch_metrics, clean_metrics
from determined.core import _tensorboard

logger = logging.getLogger("determined.core")

# USER_REQUESTED_STOP (0.38's name): the trial asked to stop (set_stop_requested); it ends COMPLETED.
EARLY_EXIT_REASONS = ("ERRORED", "USER_CANCELED", "INVALID_HP", "USER_REQUESTED_STOP")


class TrainContext:
    """Reports metrics to the master, or, with no master, to the `determined.core` logger.

    Only the chief (rank 0) reports; the other ranks' calls do nothing. Without a master, every report
    is also kept in `training_history` / `validation_history` (lists of `{"steps_completed", "metrics"}`).
    """

    def __init__(
        self,
        session: Optional[Session],
        trial_id: int,
        distributed: DistributedContext,
        searcher_metric: Optional[str] = None,
        smaller_is_better: bool = True,
    ) -> None:
        self._session = session
        self._trial_id = trial_id
        self._distributed = distributed
        self._searcher_metric = searcher_metric
        self._smaller_is_better = smaller_is_better
        self._best_local: Optional[float] = None
        self.last_validation_was_best = False
        self.training_history: List[Dict[str, Any]] = []
        self.validation_history: List[Dict[str, Any]] = []
        self.early_exit_reason: Optional[str] = None
        # The trial's TensorBoard files: the reported metrics for `det tensorboard` (only with a master), and
        # the event file the trial's own TensorBoard writers share.
        self._tensorboard = _tensorboard.TrialMetricsWriter(session, trial_id, rank=distributed.rank)
        _tensorboard.set_current(self._tensorboard)

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: Dict[str, Any],
        batch_metrics: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        """Report the averaged training metrics after `steps_completed` batches (and optionally each batch's)."""
        if self._distributed.rank != 0:
            return
        body: Dict[str, Any] = {"steps_completed": int(steps_completed), "metrics": clean_metrics(metrics)}
        cleaned_batches = clean_batch_metrics(batch_metrics)
        if cleaned_batches is not None:
            body["batch_metrics"] = cleaned_batches
        if self._session is None:
            logger.info("training metrics after %d batches: %s", steps_completed, body["metrics"])
            self.training_history.append(body)
            return
        self._session.post(f"/trials/{self._trial_id}/training_metrics", json=body)
        self._tensorboard_write("training", steps_completed, body["metrics"])

    def report_validation_metrics(self, steps_completed: int, metrics: Dict[str, Any]) -> None:
        """Report validation metrics; `last_validation_was_best` then says whether they are the experiment's best."""
        if self._distributed.rank != 0:
            return
        body = {"steps_completed": int(steps_completed), "metrics": clean_metrics(metrics)}
        if self._session is None:
            logger.info("validation metrics after %d batches: %s", steps_completed, body["metrics"])
            self.validation_history.append(body)
            self.last_validation_was_best = self._is_best_locally(body["metrics"])
            return
        answer = self._session.post(f"/trials/{self._trial_id}/validation_metrics", json=body) or {}
        self.last_validation_was_best = bool(answer.get("is_best", False))
        self._tensorboard_write("validation", steps_completed, body["metrics"])

    def _tensorboard_write(self, group: str, steps_completed: int, metrics: Dict[str, Any]) -> None:
        self._tensorboard.write(group, int(steps_completed), metrics)

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory for this trial's TensorBoard event files: on the chief of a trial whose master keeps its
        data dir on this machine, the one `det tensorboard start` serves; elsewhere a local temporary directory.
        Write into it through one writer (TensorBoard reads a run directory's files one after the other)."""
        return self._tensorboard.directory()

    def report_early_exit(self, reason: str) -> None:
        """Tell the master the trial stops early: ERRORED, USER_CANCELED, INVALID_HP or USER_REQUESTED_STOP."""
        reason = getattr(reason, "value", reason)
        if reason not in EARLY_EXIT_REASONS:
            raise errors.DeterminedError(
                f"early exit reason {reason!r} is not one of {', '.join(EARLY_EXIT_REASONS)}"
            )
        if self._distributed.rank != 0:
            return
        self.early_exit_reason = reason
        if self._session is None:
            logger.info("trial exits early: %s", reason)
            return
        self._session.post(f"/trials/{self._trial_id}/early_exit", json={"reason": reason})

    def _is_best_locally(self, metrics: Dict[str, Any]) -> bool:
        if self._searcher_metric is None:
            return False
        if self._searcher_metric not in metrics:
            raise errors.DeterminedError(
                f"the validation metrics lack the searcher metric {self._searcher_metric!r} "
                f"(searcher.metric); reported metrics: {', '.join(sorted(metrics)) or 'none'}"
            )
        value = metrics[self._searcher_metric]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        better = (
            self._best_local is None
            or (value < self._best_local if self._smaller_is_better else value > self._best_local)
        )
        if better:
            self._best_local = float(value)
        return better
