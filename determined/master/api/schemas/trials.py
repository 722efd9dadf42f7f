"""Trials: GET /trials/{id}, its metrics, logs and checkpoints, POST /trials/{id}/kill (views/serialize.trial,
views/reads.trial*); the unmanaged runs' trial routes (POST/PUT/PATCH /trials, POST /trials/{id}/start)."""
from typing import Any, Dict, List, Optional, Union

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire
from determined.master.api.schemas.checkpoints import Checkpoint



# ---------------------------------------------------------------- answers


class LogPolicyMatch(Wire):
    """The first line of a run's logs that a log policy of the config matched."""

    name: Optional[str] = None
    action: Optional[str] = None
    allocation_id: Optional[str] = None
    node: Optional[str] = None
    line: Optional[str] = None


class Trial(Wire):
    """A trial as every answer shows it (views/serialize.trial)."""

    id: int
    experiment_id: int
    request_id: str = Field(description="the search method's name of the trial")
    state: str
    status: Optional[str] = Field(description="what it does now (lifecycle/trial_status.py); null when unknown")
    status_reason: Optional[str] = None
    hparams: Dict[str, Any] = Field(description="its hyperparameters (the user's names)")
    seed: int
    restarts: int
    total_batches: int
    start_time: Optional[str] = Field(description="when its first run started; null while it never ran")
    end_time: Optional[str] = Field(description="when it stopped training for good; null until it ended")
    stopped_training_time: Optional[str] = Field(
        None, description="while it has not ended: when its last operation completed and it stopped training to wait "
                          "(for a promotion, the search method, its paused experiment); null while it trains or waits "
                          "for a slot to train, and once it ended (see end_time)")
    best_validation: Optional[float] = Field(description="its best value of the searcher metric")
    latest_validation: Optional[Dict[str, Any]] = Field(description="its latest validation metrics")
    latest_checkpoint_uuid: Optional[str] = None
    warm_start_checkpoint_uuid: Optional[str] = None
    log_policy_matched: Optional[str] = Field(description="the name of the log policy that matched last")
    log_policy_matches: List[LogPolicyMatch]
    runner_status: Optional[str] = Field(description="the status text its code set (set_status)")
    external_trial_id: Optional[str] = Field(description="the id an unmanaged run gave it")


class TrialAnswer(Wire):
    """One trial: `{"trial": {...}}`."""

    trial: Trial


class TrainingMetricsRecord(Wire):
    """A training report: the averaged metrics after `steps_completed` batches, and each batch's."""

    steps_completed: int
    metrics: Dict[str, Any]
    batch_metrics: Optional[List[Dict[str, Any]]]
    end_time: Optional[str]


class MetricsRecord(Wire):
    """A validation report, or a report of any other group: its metrics after `steps_completed`."""

    steps_completed: int
    metrics: Dict[str, Any]
    end_time: Optional[str]


class TrialDetail(Wire):
    """GET /trials/{id}: the trial with its metrics and checkpoints."""

    trial: Trial
    training_metrics: List[TrainingMetricsRecord]
    validation_metrics: List[MetricsRecord]
    metric_groups: List[str] = Field(description="training, validation, then the other groups it reported")
    checkpoints: List[Checkpoint]


class TrialMetrics(Wire):
    """GET /trials/{id}/metrics: the trial's metrics of one group, by steps_completed."""

    group: str
    metrics: List[Union[TrainingMetricsRecord, MetricsRecord]] = Field(
        description="training records carry batch_metrics; the other groups' do not")


class TrialLogLine(Wire):
    """A line a trial's process wrote."""

    id: int
    timestamp: Optional[str]
    stream: str = Field(description="stdout or stderr")
    message: str


class TrialLogs(Wire):
    """GET /trials/{id}/logs: a page of lines; `next_offset` continues after them."""

    logs: List[TrialLogLine]
    next_offset: int
    trial_state: str


class LatestCheckpoint(Wire):
    """The checkpoint a run continues from."""

    uuid: str
    steps_completed: int


class RunStart(Wire):
    """What a run of the trial starts with (lifecycle/protocol.trial_context): POST /trials/{id}/start's answer."""

    trial_id: int
    experiment_id: int
    config: Dict[str, Any] = Field(description="the experiment's config")
    hparams: Dict[str, Any]
    trial_seed: int
    latest_checkpoint: Optional[LatestCheckpoint] = Field(description="what to continue from; null: start afresh")
    steps_completed: int
    trial_run_id: int
    cluster_id: str


# ---------------------------------------------------------------- requests of unmanaged runs


class CreateTrialRequest(StrictWire):
    """POST /trials: a new trial of an unmanaged experiment (0.38's CreateTrial)."""

    experiment_id: Optional[int] = None
    hparams: Any = Field(None, description="an object of hyperparameters")
    unmanaged: Optional[bool] = Field(None, description="must be true")


class PutTrialRequest(StrictWire):
    """PUT /trials: the trial of `external_trial_id`, created when there is none (0.38's PutTrial)."""

    create_trial_request: Optional[CreateTrialRequest] = None
    external_trial_id: Optional[str] = None


class StartTrialRequest(StrictWire):
    """POST /trials/{id}/start: a run of an unmanaged trial starts (both fields are accepted and ignored)."""

    resume: Optional[bool] = None
    trial_id: Optional[int] = None


class PatchTrialRequest(StrictWire):
    """PATCH /trials/{id}: the state an unmanaged run reports (RUNNING, COMPLETED, ERROR, CANCELED; a `STATE_`
    prefix is accepted); without one, a sign of life."""

    state: Optional[str] = None
    trial_id: Optional[int] = Field(None, description="accepted and ignored")


__all__ = ["CreateTrialRequest", "LatestCheckpoint", "LogPolicyMatch", "MetricsRecord", "PatchTrialRequest",
           "PutTrialRequest", "RunStart", "StartTrialRequest", "StrictWire", "TrainingMetricsRecord", "Trial",
           "TrialAnswer", "TrialDetail", "TrialLogLine", "TrialLogs", "TrialMetrics"]
