"""What the web UI reads of one experiment: learning curves, model files, hyperparameter importance, searcher
progress (api/insights.py)."""
from typing import Any, Dict, List, Optional, Union

from pydantic import Field

from determined.master.api.schemas._base import Wire


class CurvePoint(Wire):
    """A point of a trial's downsampled learning curve: its numeric metrics at one report."""

    steps_completed: int
    end_time: str
    metrics: Dict[str, Any] = Field(description="the numeric metrics of the report, by name")


class TrialCurves(Wire):
    """A trial and its learning curves."""

    trial_id: int
    state: str
    hparams: Dict[str, Any] = Field(description="the trial's hyperparameters")
    best_validation: Optional[float] = None
    total_batches: int
    start_time: Optional[str] = Field(None, description="when its first run started; null while it never ran")
    training: List[CurvePoint]
    validation: List[CurvePoint]


class MetricNames(Wire):
    """The names of the numeric metrics reported in each group."""

    training: List[str]
    validation: List[str]


class ExperimentMetrics(Wire):
    """Every trial's learning curves (GET /experiments/{id}/metrics)."""

    trials: List[TrialCurves]
    groups: List[str]
    metric_names: MetricNames
    max_points: int = Field(description="the most points per metric of each trial's series")


class ModelFile(Wire):
    """A file of the experiment's model definition."""

    path: str
    size: int
    text: Optional[str] = Field(None, description="its text; null for a binary or big file")


class ModelFiles(Wire):
    """The files of the experiment's model definition, by path."""

    files: List[ModelFile]
    truncated: bool = Field(description="true when the archive has more files than are listed")


class HyperparameterImportance(Wire):
    """For each searched hyperparameter, the share of the variance of the trials' best metric it explains."""

    metric: str
    smaller_is_better: bool
    num_trials: int
    importance: Dict[str, float] = Field(description="share by dotted hyperparameter name; empty with too few trials")
    method: str
    min_trials: int


class RungReport(Wire):
    """A trial that reported in a rung."""

    trial_id: Optional[int] = None
    request_id: Optional[str] = Field(None, description="ASHA methods only: the search method's id of the trial")
    promoted: bool
    metric: Optional[Union[int, float]] = Field(None, description="its metric; null when it reported none")


class Rung(Wire):
    """A rung of a bracket: a length in the searcher's unit, who reached it and who is on the way."""

    index: int
    length: int
    reported: List[RungReport]
    in_progress: List[Optional[int]] = Field(description="ids of the trials training towards it")
    promoted: int


class Bracket(Wire):
    """A bracket of the search method."""

    rungs: List[Rung]
    max_trials: Optional[int] = None


class SearcherProgress(Wire):
    """The search method's progress: its brackets and rungs, and the trials by state."""

    name: str
    unit: str
    progress: float
    trials_by_state: Dict[str, int]
    brackets: List[Bracket]
