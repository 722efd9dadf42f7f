"""Reporting metrics (training, validation, any group), progress, status and the trial's metadata."""
import enum
import logging
import math
import pathlib
from typing import Any, Callable, Dict, List, Optional

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext
from determined.core._metrics import clean_batch_metrics, clean_metrics
from determined.core import _tensorboard

logger = logging.getLogger("determined.core")

# USER_REQUESTED_STOP (0.38's name): the trial asked to stop (set_stop_requested); it ends COMPLETED.
EARLY_EXIT_REASONS = ("ERRORED", "USER_CANCELED", "INVALID_HP", "USER_REQUESTED_STOP")


class EarlyExitReason(enum.Enum):
    """Why a trial stops early (`report_early_exit`): Determined 0.38's reasons."""

    INVALID_HP = "INVALID_HP"
    USER_REQUESTED_STOP = "USER_REQUESTED_STOP"


class TensorboardMode(enum.Enum):
    """`AUTO` (core.init's default): the chief writes every reported metric to the trial's TensorBoard files.
    `MANUAL`: the platform writes nothing; the code writes into `get_tensorboard_path()` and calls
    `upload_tensorboard_files()`."""

    AUTO = "AUTO"
    MANUAL = "MANUAL"


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
        *,
        master_data_dir: Optional[str] = None,
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
        self._tensorboard = _tensorboard.TrialMetricsWriter(session, trial_id, rank=distributed.rank,
                                                            master_data_dir=master_data_dir)
        _tensorboard.set_current(self._tensorboard)
        self._tensorboard_mode = TensorboardMode.AUTO
        self.group_history: Dict[str, List[Dict[str, Any]]] = {}
        self.progress: Optional[float] = None
        self.status: Optional[str] = None
        self._local_metadata: Dict[str, Any] = {}

    def _set_tensorboard_mode(self, mode: "TensorboardMode | str") -> None:
        self._tensorboard_mode = TensorboardMode(getattr(mode, "value", mode))
        self._tensorboard.enabled = self._tensorboard_mode == TensorboardMode.AUTO

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
        """Report validation metrics; `last_validation_was_best` then says whether they are the experiment's best.

        They are what the search method sees. As Determined 0.38: a `bytes` value is dropped with a warning, a
        None value is an error."""
        if self._distributed.rank != 0:
            return
        if not isinstance(metrics, dict):
            raise TypeError(f"metrics must be a dict of name -> value, got {type(metrics).__name__}")
        for name, value in list(metrics.items()):
            if isinstance(value, (bytes, bytearray)):
                logger.warning("validation metric %r is bytes; it is not reported", name)
                metrics = {k: v for k, v in metrics.items() if k != name}
            elif value is None:
                raise RuntimeError(f"validation metric {name!r} is None: report a number (or leave the key out)")
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

    def report_metrics(self, group: str, steps_completed: int, metrics: Dict[str, Any]) -> None:
        """Report metrics of any group at `steps_completed` (the x-axis); `training` and `validation` are the
        groups of `report_training_metrics` and `report_validation_metrics` (only validation reaches the search
        method). A group is a non-empty name without '.'."""
        if not isinstance(group, str) or not group or "." in group:
            raise ValueError(f"report_metrics(): group must be a non-empty string without '.', got {group!r}")
        if group == "training":
            self.report_training_metrics(steps_completed, metrics)
            return
        if group == "validation":
            self.report_validation_metrics(steps_completed, metrics)
            return
        if self._distributed.rank != 0:
            return
        body = {"group": group, "steps_completed": int(steps_completed), "metrics": clean_metrics(metrics)}
        if self._session is None:
            logger.info("%s metrics after %d steps: %s", group, steps_completed, body["metrics"])
            self.group_history.setdefault(group, []).append(body)
            return
        self._session.post(f"/trials/{self._trial_id}/metrics", json=body)
        self._tensorboard_write(group, steps_completed, body["metrics"])

    def report_progress(self, progress: float) -> None:
        """How far the trial is, a fraction from 0 to 1; the experiment's progress follows (chief only)."""
        if isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0 <= progress <= 1:
            raise ValueError(f"report_progress(): progress must be a number from 0 to 1, got {progress!r}")
        if self._distributed.rank != 0:
            return
        self.progress = float(progress)
        if self._session is None:
            logger.info("progress: %.1f%%", 100 * self.progress)
            return
        self._session.post(f"/trials/{self._trial_id}/progress", json={"progress": self.progress})

    def set_status(self, status: str) -> None:
        """A short text shown with the trial (`det trial describe`, the web UI); chief only."""
        if not isinstance(status, str):
            raise TypeError(f"set_status(): status must be a string, got {type(status).__name__}")
        if self._distributed.rank != 0:
            return
        self.status = status
        if self._session is None:
            logger.info("status: %s", status)
            return
        self._session.post(f"/trials/{self._trial_id}/runner/metadata", json={"state": status})

    def get_experiment_best_validation(self) -> Optional[float]:
        """The best value of `searcher.metric` in the experiment so far (None when there is none)."""
        if self._session is None:
            return self._best_local
        try:
            answer = self._session.get(f"/trials/{self._trial_id}/searcher/best_validation") or {}
        except errors.APIError as e:
            if e.status_code == 404:
                return None
            raise
        value = answer.get("metric")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def set_metadata(self, metadata: Dict[str, Any]) -> None:
        """Merge `metadata` (a JSON object) into the trial's metadata, which survives its restarts (chief only)."""
        if not isinstance(metadata, dict):
            raise TypeError(f"set_metadata(): metadata must be a dict, got {type(metadata).__name__}")
        if self._distributed.rank != 0:
            return
        cleaned = clean_metrics(metadata)
        if self._session is None:
            self._local_metadata.update(cleaned)
            return
        self._session.post(f"/trials/{self._trial_id}/run_metadata", json={"metadata": cleaned})

    def get_metadata(self) -> Dict[str, Any]:
        """The trial's metadata (`set_metadata`), as kept by the master."""
        if self._session is None:
            return dict(self._local_metadata)
        return dict((self._session.get(f"/trials/{self._trial_id}/run_metadata") or {}).get("metadata") or {})

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        """With `core.init(tensorboard_mode=TensorboardMode.MANUAL)`: publish the files the code wrote into
        `get_tensorboard_path()`. Here that directory is the one `det tensorboard start` serves when the master's
        data dir is on this machine, so the files are in place already; elsewhere they stay local (logged once)."""
        if self._tensorboard_mode != TensorboardMode.MANUAL:
            raise RuntimeError(
                "upload_tensorboard_files() is for core.init(tensorboard_mode=TensorboardMode.MANUAL); in AUTO mode "
                "the platform writes the reported metrics itself"
            )
        if self._distributed.rank != 0 or self._tensorboard.served:
            return
        if not getattr(self, "_warned_local_tensorboard", False):
            self._warned_local_tensorboard = True
            logger.warning("TensorBoard files under %s stay on this machine: the master's data dir is elsewhere",
                           self.get_tensorboard_path())

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory for this trial's TensorBoard event files: on the chief of a trial whose master keeps its
        data dir on this machine, the one `det tensorboard start` serves; elsewhere a local temporary directory.
        Write into it through one writer (TensorBoard reads a run directory's files one after the other)."""
        return self._tensorboard.directory()

    def report_early_exit(self, reason: "EarlyExitReason | str") -> None:
        """Tell the master the trial stops early: `EarlyExitReason.INVALID_HP` (the search method replaces it),
        `USER_REQUESTED_STOP`, or ERRORED, USER_CANCELED. A repeated report is ignored."""
        reason = getattr(reason, "value", reason)
        if reason not in EARLY_EXIT_REASONS:
            raise errors.DeterminedError(
                f"early exit reason {reason!r} is not one of {', '.join(EARLY_EXIT_REASONS)}"
            )
        if self._distributed.rank != 0 or self.early_exit_reason == reason:
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
            # Stored as it is, as the master stores it (Determined 0.26/0.38): never the best validation.
            return False
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
