"""Checkpoints: GET/DELETE /checkpoints/{uuid}, their metadata, metrics and files (views/serialize.checkpoint)."""
from typing import Any, Dict, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire


class CheckpointModelVersion(Wire):
    """A model version of the registry that points at the checkpoint."""

    model_name: str
    version: int


class Checkpoint(Wire):
    """A checkpoint as every answer shows it (views/serialize.checkpoint)."""

    uuid: str
    experiment_id: int
    trial_id: int
    state: str = Field(description="ACTIVE, COMPLETED, ERROR, DELETED or PARTIALLY_DELETED")
    steps_completed: int
    batch_number: int = Field(description="the same as steps_completed (Determined's older name)")
    resources: Dict[str, Any] = Field(description="each file of the checkpoint (a path) and its size in bytes")
    framework: str
    format: str
    metadata: Dict[str, Any] = Field(description="the user's metadata")
    hparams: Dict[str, Any] = Field(description="the hyperparameters of its trial ({} if the trial is gone)")
    validation_metrics: Dict[str, Any] = Field(
        description="the validation metrics its trial reported at the same steps_completed ({} if none)")
    determined_version: str
    start_time: str
    end_time: str
    storage: Optional[Dict[str, Any]] = Field(
        None, description="the checkpoint_storage of its experiment's config, secrets hidden")
    model_versions: List[CheckpointModelVersion]


class CheckpointAnswer(Wire):
    """One checkpoint: `{"checkpoint": {...}}`."""

    checkpoint: Checkpoint


class Omitted(Wire):
    """A stored row a list leaves out because it cannot be shown as JSON (api/_deps.json_list)."""

    id: Any
    reason: str


class CheckpointList(Wire):
    """Checkpoints of an experiment or a trial; `omitted` names rows that cannot be shown."""

    checkpoints: List[Checkpoint]
    omitted: Optional[List[Omitted]] = None


class LinkedMetrics(Wire):
    """Metrics of one report of a trial that used the checkpoint or model version."""

    trial_id: int
    group: str = Field(description="training, validation or the name of another group")
    steps_completed: int
    metrics: Dict[str, Any] = Field(description="the metrics as the trial reported them")
    end_time: str
    batch_metrics: Optional[List[Any]] = Field(None, description="training reports only: the per-batch metrics")


class SourceMetrics(Wire):
    """The metrics of the trials that reported using a checkpoint or a model version, trial by trial."""

    trial_ids: List[int]
    metrics: List[LinkedMetrics]


class RemovedFiles(Wire):
    """What POST /checkpoints/{uuid}/remove_files removed, and the checkpoint's state after it."""

    removed: List[str]
    state: str
    skipped_links: List[str] = Field(
        [], description="entries of the checkpoint not stored again: symbolic links leading out of it (never "
                        "followed), fifos and devices")


class CheckpointMetadataBody(StrictWire):
    """POST /checkpoints/{uuid}/metadata: top-level keys of `metadata` replace the checkpoint's."""

    metadata: Any = Field(None, description="an object of metadata to merge")


class RemoveFilesBody(StrictWire):
    """POST /checkpoints/{uuid}/remove_files: the files to remove, as glob patterns."""

    globs: Any = Field(None, description="a list of glob patterns relative to the checkpoint")


__all__ = ["Checkpoint", "CheckpointAnswer", "CheckpointList", "CheckpointMetadataBody", "CheckpointModelVersion",
           "LinkedMetrics", "Omitted", "RemoveFilesBody", "RemovedFiles", "SourceMetrics"]
