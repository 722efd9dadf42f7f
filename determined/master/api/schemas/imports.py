"""Imports of a Determined cluster's history (`det import determined`): /imports/determined/... (docs/import.md).

Each body is one batch of rows of one kind that the client read from the source database, named by the source
cluster's id; times are ISO 8601 text, ids the source's. The answer says what the batch did."""
import datetime
from typing import Any, Dict, List, Optional, Tuple

from typing_extensions import Annotated

from pydantic import Field, field_validator

from determined.master.api.schemas._base import Wire

Id = Annotated[int, Field(ge=-2**31, le=2**31 - 1)]
Time = Optional[datetime.datetime]
_Rows = Field(max_length=20000, description="the batch's rows, in increasing source id")


class _Batch(Wire):
    source: str = Field(min_length=1, max_length=128, description="the source cluster's id (its cluster_id table)")
    dry_run: bool = Field(False, description="check and count, write nothing")


class UserRow(Wire):
    id: Id
    username: str = Field(min_length=1, max_length=128)
    admin: bool = False
    active: bool = True


class WorkspaceRow(Wire):
    id: Id
    name: str = Field(min_length=1, max_length=256)
    archived: bool = False
    immutable: bool = False
    owner_id: Optional[Id] = None
    created_at: Time = None


class ProjectRow(Wire):
    id: Id
    workspace_id: Optional[Id] = None
    name: str = Field(min_length=1, max_length=256)
    description: Optional[str] = None
    notes: Optional[Any] = None
    archived: bool = False
    immutable: bool = False
    owner_id: Optional[Id] = None
    created_at: Time = None


class ExperimentRow(Wire):
    id: Id
    state: str
    config: Dict[str, Any]
    model_definition: Optional[str] = Field(None, description="base64 of the .tar.gz Determined kept")
    notes: Optional[str] = None
    owner_id: Optional[Id] = None
    project_id: Optional[Id] = None
    archived: bool = False
    progress: Optional[float] = None
    start_time: Time = None
    end_time: Time = None


class TrialRow(Wire):
    id: Id
    experiment_id: Id
    state: str
    hparams: Optional[Dict[str, Any]] = None
    seed: Optional[Id] = None
    request_id: Optional[str] = None
    restarts: Optional[Id] = None
    start_time: Time = None
    end_time: Time = None


METRIC_COLUMNS = ("id", "trial_id", "group", "total_batches", "end_time", "metrics", "batch_metrics", "archived")
"""The columns of a metric batch's rows, in this order (`MetricsBatch.columns` says them, so a client that sends
another order or set is refused by name rather than read wrongly)."""

JsonObjectText = Annotated[str, Field(pattern=r"^\s*\{", description="JSON text of an object")]
JsonListText = Annotated[str, Field(pattern=r"^\s*\[", description="JSON text of a list")]

MetricCells = Tuple[Id, Id, Optional[Annotated[str, Field(max_length=128)]], Id, Time, Optional[JsonObjectText],
                    Optional[JsonListText], bool]
"""One metric row: id, trial_id, group (GENERIC rows; else null), total_batches, end_time, metrics (JSON text of an
object), batch_metrics (JSON text of a list; TRAINING rows), archived. The metrics are JSON text, not objects: the
master stores them as they came without decoding and encoding each (PostgreSQL's json input checks the text; on
SQLite the master parses it), which is most of the cost of a million rows."""


class CheckpointRow(Wire):
    uuid: str = Field(min_length=1, max_length=64)
    trial_id: Optional[Id] = None
    task_id: Optional[str] = None
    state: str
    report_time: Time = None
    resources: Optional[Dict[str, Any]] = None
    metadata: Optional[Dict[str, Any]] = None
    steps_completed: Optional[Id] = None
    framework: Optional[str] = None
    format: Optional[str] = None
    determined_version: Optional[str] = None


class ModelRow(Wire):
    id: Id
    name: str = Field(min_length=1, max_length=256)
    description: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    labels: Optional[List[str]] = None
    notes: Optional[str] = None
    archived: bool = False
    owner_id: Optional[Id] = None
    workspace_id: Optional[Id] = None
    creation_time: Time = None
    last_updated_time: Time = None


class ModelVersionRow(Wire):
    id: Id
    model_id: Id
    version: Id
    checkpoint_uuid: str
    name: Optional[str] = None
    comment: Optional[str] = None
    notes: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    labels: Optional[List[str]] = None
    creation_time: Time = None


class LogRow(Wire):
    id: Id
    trial_id: Id
    timestamp: Time = None
    stream: Optional[str] = None
    message: str


class UsersBatch(_Batch):
    rows: List[UserRow] = _Rows


class WorkspacesBatch(_Batch):
    rows: List[WorkspaceRow] = _Rows


class ProjectsBatch(_Batch):
    rows: List[ProjectRow] = _Rows


class ExperimentsBatch(_Batch):
    rows: List[ExperimentRow] = _Rows


class TrialsBatch(_Batch):
    rows: List[TrialRow] = _Rows


class CheckpointsBatch(_Batch):
    rows: List[CheckpointRow] = _Rows


class ModelsBatch(_Batch):
    rows: List[ModelRow] = _Rows


class ModelVersionsBatch(_Batch):
    rows: List[ModelVersionRow] = _Rows


class MetricsBatch(_Batch):
    """Metric rows of one source table, columnar: `columns` names the cells of every row of `rows` (a list of
    primitives per row, not an object: 20,000 rows are parsed and checked in one pass of pydantic-core, and the
    body is half the size)."""

    table: str = Field(min_length=1, max_length=100, description="the source table, e.g. metrics:TRAINING")
    partition: str = Field(pattern="^(TRAINING|VALIDATION|GENERIC)$", description="the partition of every row")
    columns: List[str] = Field(max_length=len(METRIC_COLUMNS),
                               description="exactly " + ", ".join(METRIC_COLUMNS) + ", in this order")
    rows: List[MetricCells] = Field(max_length=20000, description="the batch's rows, in increasing source id; "
                                                                  "each a list of the cells `columns` names")

    @field_validator("columns")
    @classmethod
    def _known_columns(cls, value: List[str]) -> List[str]:
        if tuple(value) != METRIC_COLUMNS:
            raise ValueError(f"columns must be exactly {list(METRIC_COLUMNS)} in this order, not {value[:10]}")
        return value


class LogsBatch(_Batch):
    table: str = Field(min_length=1, max_length=100, description="the source table, e.g. task_logs")
    rows: List[LogRow] = _Rows


class SkippedRow(Wire):
    old_id: str
    reason: str


class ImportBatchAnswer(Wire):
    """What a batch did: rows imported (in a dry run: that would be), already there, skipped with the reason."""

    imported: Id
    already: Id
    skipped: List[SkippedRow]


class ImportProgress(Wire):
    """What this master holds of a source cluster: rows recorded per kind, the watermark of each metric/log table."""

    source: str
    counts: Dict[str, int]
    watermarks: Dict[str, int]
