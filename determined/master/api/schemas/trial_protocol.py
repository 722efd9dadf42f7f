"""What a trial's process pulls and reports (api/trial_protocol.py, lifecycle/protocol.py): its context and searcher
operations, metrics, checkpoints, progress, status, metadata, early exits, preemption, source infos."""
from typing import Any, Dict, List, Optional, Union

from pydantic import BeforeValidator, Field
from typing_extensions import Annotated

from determined.master.api.schemas.experiments import ModelDefinition
from determined.master.api.schemas._base import StrictWire, Wire
from determined.master.api.schemas.trials import RunStart

# ---------------------------------------------------------------- answers


class SearcherOperation(Wire):
    """The trial's next searcher operation: train to `length` batches, wait, or stop (`completed`)."""

    length: Optional[int] = Field(None, description="train until this many batches, then validate")
    searcher_length: Optional[int] = Field(None, description="the same length in the searcher's unit")
    completed: Optional[bool] = Field(None, description="true: no more operations, the trial ends")
    wait: Optional[bool] = Field(None, description="true: the search method has not decided yet; ask again")


class TrialContext(RunStart):
    """GET /trials/{id}/context: what the trial's run starts with (config secrets only for the trial's own run)."""

    master_data_dir: str
    model_def: Optional[ModelDefinition] = Field(None, description="with `with_model_def`")
    searcher_operation: Optional[SearcherOperation] = Field(None, description="with `with_operation`")
    preempt: Optional[bool] = Field(None, description="with `with_operation`: whether the run is asked to stop")


class CompletedOperationAnswer(Wire):
    """POST .../searcher/completed_operation: what the trial asks next, already answered (`{}` for a repeated
    completion)."""

    next_operation: Optional[SearcherOperation] = None
    preempt: Optional[bool] = None


class ValidationReported(Wire):
    """POST /trials/{id}/validation_metrics: whether it is the experiment's best validation so far."""

    is_best: bool


class PreemptionSignal(Wire):
    """GET /allocations/{id}/signals/preemption: whether the run should checkpoint and stop."""

    preempt: bool


class RunMetadata(Wire):
    """The trial's metadata (`set_metadata`), kept across its restarts."""

    metadata: Dict[str, Any]


class BestValidation(Wire):
    """GET /trials/{id}/searcher/best_validation: the best searcher metric of the trial's experiment."""

    metric: float


class TrialSourceInfo(Wire):
    """The checkpoint or model version a trial used."""

    trial_id: int
    checkpoint_uuid: str
    kind: str = Field(description="INFERENCE or FINE_TUNING")
    model_id: Optional[int]
    model_version: Optional[int]


class TrialSourceInfoAnswer(Wire):
    """POST /trials/{id}/source_info: the link recorded."""

    trial_source_info: TrialSourceInfo


# ---------------------------------------------------------------- requests (the routes check the values)


class CompletedOperation(StrictWire):
    """POST .../searcher/completed_operation: the trial trained to `length` batches; `metric` is its searcher
    metric."""

    length: Optional[int] = None
    metric: Any = Field(None, description="a number; any JSON value for a custom search")


class TrainingMetricsReport(StrictWire):
    """POST /trials/{id}/training_metrics: averaged metrics after `steps_completed` batches, and each batch's."""

    steps_completed: Optional[int] = Field(None, description="a non-negative integer (required)")
    metrics: Optional[Dict[str, Any]] = None
    batch_metrics: Optional[List[Dict[str, Any]]] = None


def _object_or_none(value: Any) -> Any:
    # The route names a body that is not a JSON object itself ("the request body must be a JSON object").
    return value if isinstance(value, dict) else None


# The training report's body as the route takes it: anything but an object reaches it as None.
TrainingMetricsBody = Annotated[Optional[TrainingMetricsReport], BeforeValidator(_object_or_none)]


class ValidationMetricsReport(StrictWire):
    """POST /trials/{id}/validation_metrics: the metrics after `steps_completed` batches."""

    steps_completed: Optional[int] = Field(None, description="a non-negative integer (required)")
    metrics: Optional[Dict[str, Any]] = Field(None, description="an object of metrics (required)")


class GroupMetricsReport(StrictWire):
    """POST /trials/{id}/metrics: metrics of a group other than training and validation."""

    group: Optional[str] = Field(None, description="a non-empty name without '.' (required)")
    steps_completed: Optional[int] = Field(None, description="a non-negative integer (required)")
    metrics: Optional[Dict[str, Any]] = Field(None, description="an object of metrics (required)")


class CheckpointReport(StrictWire):
    """POST /trials/{id}/checkpoints: a checkpoint the trial stored."""

    uuid: Optional[str] = Field(None, description="a new random UUID in canonical form (required)")
    steps_completed: Optional[int] = Field(None, description="a non-negative integer (required)")
    resources: Optional[Dict[str, Any]] = Field(None, description="each file (a path) and its size in bytes")
    framework: Any = Field(None, description="text (another value is stored as its text)")
    format: Any = Field(None, description="text (another value is stored as its text)")
    metadata: Optional[Dict[str, Any]] = None


class EarlyExit(StrictWire):
    """POST /trials/{id}/early_exit: why the trial stops before the searcher closed it."""

    reason: Optional[str] = Field(None, description="ERRORED, USER_CANCELED, INVALID_HP or USER_REQUESTED_STOP")


class ProgressReport(StrictWire):
    """POST /trials/{id}/progress: how far the trial is."""

    progress: Optional[Union[int, float]] = Field(None, description="a fraction from 0 to 1 (required)")


class RunnerStatus(StrictWire):
    """POST /trials/{id}/runner/metadata: the status text the trial's code set (`set_status`)."""

    state: Optional[str] = Field(None, description="at most 1024 characters (required)")


class RunMetadataUpdate(StrictWire):
    """POST /trials/{id}/run_metadata: merged into the trial's metadata, top-level keys replaced."""

    metadata: Optional[Dict[str, Any]] = Field(None, description="an object (required)")


class SourceInfoReport(StrictWire):
    """POST /trials/{id}/source_info: the checkpoint, or the model version, the trial used."""

    checkpoint_uuid: Optional[str] = None
    model_id: Any = Field(None, description="a positive integer, with model_version")
    model_version: Any = Field(None, description="a positive integer, with model_id")
    kind: Optional[str] = Field(None, description="INFERENCE (default) or FINE_TUNING")


__all__ = ["BestValidation", "CheckpointReport", "CompletedOperation", "CompletedOperationAnswer", "EarlyExit",
           "GroupMetricsReport", "PreemptionSignal", "ProgressReport", "RunMetadata", "RunMetadataUpdate",
           "RunnerStatus", "SearcherOperation", "SourceInfoReport", "TrainingMetricsBody", "TrainingMetricsReport",
           "TrialContext", "TrialSourceInfo", "TrialSourceInfoAnswer", "ValidationMetricsReport",
           "ValidationReported"]
