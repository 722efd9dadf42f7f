"""Experiments: create, list, describe, change, continue, delete, GC (views/serialize.experiment); the searcher
events and operations of a custom search's runner; unmanaged experiments (PUT /experiments/by-external-id/{id})."""
from typing import Any, Dict, List, Optional, Union

from pydantic import Field

from determined.master.api.schemas._base import Empty, StrictWire, Wire
from determined.master.api.schemas.checkpoints import Checkpoint, Omitted
from determined.master.api.schemas.trials import Trial

# ---------------------------------------------------------------- answers


class SearchedHparam(Wire):
    """A hyperparameter the search varies (not a constant)."""

    name: str = Field(description="its dotted name, as tables and charts show it")
    path: List[str] = Field(description="its path in a trial's nested hparams")
    type: str
    spec: Dict[str, Any] = Field(description="its canonical spec (ranges, base, vals)")


class Experiment(Wire):
    """An experiment as every answer shows it (views/serialize.experiment)."""

    id: int
    state: str
    name: str
    description: str
    project_id: int
    project: str
    workspace_id: Optional[int] = Field(description="null when its project is gone")
    workspace: str
    searched_hparams: List[SearchedHparam]
    labels: List[str]
    notes: str
    config: Dict[str, Any] = Field(description="its canonical config, secrets hidden")
    owner: str
    archived: bool
    start_time: Optional[str]
    end_time: Optional[str] = Field(description="null until it ended")
    progress: float
    searcher_metric: str
    smaller_is_better: bool
    num_trials: int
    best_validation: Optional[float] = Field(description="its best value of the searcher metric so far")
    best_trial_id: Optional[int]
    unmanaged: bool
    external_experiment_id: Optional[str]


class ExperimentAnswer(Wire):
    """One experiment: `{"experiment": {...}}`."""

    experiment: Experiment


class ExperimentCreated(Wire):
    """POST /experiments, PUT /experiments/by-external-id/{id}: the experiment; `created` (unmanaged experiments
    only) says whether it is new or was found by its external id."""

    experiment: Experiment
    created: Optional[bool] = None


class ExperimentList(Wire):
    """GET /experiments; `omitted` names experiments that cannot be shown."""

    experiments: List[Experiment]
    omitted: Optional[List[Omitted]] = None


class ExperimentDetail(Wire):
    """GET /experiments/{id}: the experiment and its trials, each with its status."""

    experiment: Experiment
    trials: List[Trial]


class ExperimentUpdated(Wire):
    """PATCH /experiments/{id}: the experiment and the uuids of the checkpoints GC deleted at once."""

    experiment: Experiment
    deleted: List[str]


class ExperimentDeleted(Wire):
    """DELETE /experiments/{id}: the uuids of the checkpoints deleted with it."""

    deleted_checkpoints: List[str]


class TensorboardFilesDeleted(Wire):
    """DELETE /experiments/{id}/tensorboard-files: whether there were event files."""

    deleted: bool


class GcPreview(Wire):
    """GET /experiments/{id}/preview_gc: the checkpoints GC would delete and those it keeps."""

    delete: List[Checkpoint]
    keep: List[Checkpoint]


class ModelDefinition(Wire):
    """The experiment's model definition: a .tar.gz of the model directory, in base64."""

    b64_tgz: str


class TrialRef(Wire):
    """A searcher event about one trial."""

    requestId: str


class ValidationCompletedEvent(Wire):
    """A trial completed the operation to `validateAfterLength` with `metric`."""

    requestId: str
    metric: Any = Field(description="a number, or the JSON value the trial reported to a custom search")
    validateAfterLength: int


class TrialProgressEvent(Wire):
    """A trial's progress, in units of the searcher."""

    requestId: str
    partialUnits: float


class TrialExitedEarlyEvent(Wire):
    """A trial stopped before the search closed it."""

    requestId: str
    exitedReason: str = Field(description="ERRORED, USER_CANCELED or INVALID_HP")


class ExperimentInactiveEvent(Wire):
    """The experiment does not run: paused, or over."""

    experimentState: str


class SearcherEvent(Wire):
    """An event of a custom search: its `id` and exactly one of the kinds (Determined 0.19.6 to 0.37)."""

    id: int = Field(description="-1 for experimentInactive")
    initialOperations: Optional[Empty] = None
    trialCreated: Optional[TrialRef] = None
    validationCompleted: Optional[ValidationCompletedEvent] = None
    trialProgress: Optional[TrialProgressEvent] = None
    trialClosed: Optional[TrialRef] = None
    trialExitedEarly: Optional[TrialExitedEarlyEvent] = None
    experimentInactive: Optional[ExperimentInactiveEvent] = None


class SearcherEvents(Wire):
    """GET /experiments/{id}/searcher_events: the events not acknowledged yet."""

    searcherEvents: List[SearcherEvent]


class OperationsTaken(Wire):
    """POST /experiments/{id}/searcher_operations: how many operations were carried out (0 for a repeated
    answer)."""

    taken: int


# ---------------------------------------------------------------- requests


class CreateExperimentRequest(StrictWire):
    """POST /experiments (and PUT /experiments/by-external-id/{id}, unmanaged only): a new experiment."""

    config: Any = Field(None, description="the experiment config: an object, or its YAML text (required)")
    model_definition: Optional[str] = Field(None, description="a base64-encoded .tar.gz of the model directory")
    activate: Optional[bool] = Field(None, description="start it at once (default true)")
    template: Optional[str] = Field(None, description="the name of a template the config is merged over")
    project_id: Optional[int] = Field(None, description="its project (default: the config's, else Uncategorized)")
    unmanaged: Optional[bool] = Field(None, description="true: an unmanaged experiment (core_v2), no model "
                                                        "definition")


class GcSettings(StrictWire):
    """The checkpoint GC settings of an experiment: non-negative counts of checkpoints to keep."""

    save_experiment_best: Optional[int] = None
    save_trial_best: Optional[int] = None
    save_trial_latest: Optional[int] = None


class ResourcesUpdate(StrictWire):
    """The scheduling settings of an experiment that may change while it runs."""

    max_slots: Optional[int] = Field(None, description="a positive integer, or null for no limit")
    weight: Optional[Union[int, float]] = Field(None, description="a positive number")
    priority: Optional[int] = Field(None, description="1 to 99")


class PatchExperimentRequest(StrictWire):
    """PATCH /experiments/{id}: the fields to change (an ended experiment is collected at once under new GC
    settings)."""

    checkpoint_storage: Optional[GcSettings] = None
    name: Optional[str] = None
    description: Optional[str] = None
    labels: Optional[List[str]] = None
    notes: Optional[str] = None
    resources: Optional[ResourcesUpdate] = None


class ContinueExperimentRequest(StrictWire):
    """POST /experiments/{id}/continue: `override_config` (a single experiment only) is merged into its config."""

    override_config: Optional[Dict[str, Any]] = None


class EventRef(StrictWire):
    """The event that posted operations answer."""

    id: int


class SearcherOperationsRequest(StrictWire):
    """POST /experiments/{id}/searcher_operations: the operations that answer one event."""

    searcherOperations: Optional[List[Dict[str, Any]]] = Field(
        None, description="each exactly one of createTrial, trialOperation, closeTrial, shutDown, setSearcherProgress")
    triggeredByEvent: Optional[EventRef] = None


__all__ = ["ContinueExperimentRequest", "CreateExperimentRequest", "EventRef", "Experiment", "ExperimentAnswer",
           "ExperimentCreated", "ExperimentDeleted", "ExperimentDetail", "ExperimentInactiveEvent", "ExperimentList",
           "ExperimentUpdated", "GcPreview", "GcSettings", "ModelDefinition", "OperationsTaken",
           "PatchExperimentRequest", "ResourcesUpdate", "SearchedHparam", "SearcherEvent", "SearcherEvents",
           "SearcherOperationsRequest", "TensorboardFilesDeleted", "TrialExitedEarlyEvent", "TrialProgressEvent",
           "TrialRef", "ValidationCompletedEvent"]
