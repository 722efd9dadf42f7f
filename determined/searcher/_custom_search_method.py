"""The custom search method API (Determined 0.19.6 to 0.37): the user's `SearchMethod` and the runner's `SearcherState`.

A search runner (determined.experimental._search_runner, in the user's process) calls the method's event handlers
with its `SearcherState`; they return the same operation objects (Create, ValidateAfter, Close, Shutdown) the
platform's own search methods return, plus `Progress`. The master's half of a custom search is the `custom` engine
method (determined.searcher._custom), which queues events for the runner and takes the posted operations.
"""
import abc
import dataclasses
import json
import pathlib
import uuid
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from determined.searcher._method import ExitedReason
from determined.searcher._ops import Operation, Progress

STATE_FILE = "state"

RequestId = Union[uuid.UUID, str]
RunnerOperation = Union[Operation, Progress]


def request_id_of(text: str) -> RequestId:
    """A request id as the user's method gave it: a uuid.UUID when it reads as one (0.2x methods use uuid4())."""
    try:
        return uuid.UUID(text)
    except ValueError:
        return text


@dataclasses.dataclass
class SearcherState:
    """What the runner knows of the search, passed to every event handler (read it; do not change it).

    `failures`: trials that errored; `trial_progress`: each trial's progress from 0 to 1; `trials_created`,
    `trials_closed`: request ids; `last_event_id`: the last event handled; `experiment_completed`,
    `experiment_failed`: how the experiment ended.
    """

    failures: Set[RequestId] = dataclasses.field(default_factory=set)
    trial_progress: Dict[RequestId, float] = dataclasses.field(default_factory=dict)
    trials_closed: Set[RequestId] = dataclasses.field(default_factory=set)
    trials_created: Set[RequestId] = dataclasses.field(default_factory=set)
    last_event_id: int = 0
    experiment_completed: bool = False
    experiment_failed: bool = False
    experiment_id: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "failures": [str(f) for f in self.failures],
            "trialProgress": {str(k): v for k, v in self.trial_progress.items()},
            "trialsClosed": [str(t) for t in self.trials_closed],
            "trialsCreated": [str(t) for t in self.trials_created],
            "lastEventId": self.last_event_id,
            "experimentId": self.experiment_id,
            "experimentCompleted": self.experiment_completed,
            "experimentFailed": self.experiment_failed,
        }

    def from_dict(self, d: Dict[str, Any]) -> None:
        self.failures = {request_id_of(f) for f in d.get("failures", [])}
        self.trial_progress = {request_id_of(k): float(v) for k, v in d.get("trialProgress", {}).items()}
        self.trials_closed = {request_id_of(t) for t in d.get("trialsClosed", [])}
        self.trials_created = {request_id_of(t) for t in d.get("trialsCreated", [])}
        self.last_event_id = int(d.get("lastEventId", 0))
        self.experiment_id = d.get("experimentId")
        self.experiment_completed = bool(d.get("experimentCompleted", False))
        self.experiment_failed = bool(d.get("experimentFailed", False))


class SearchMethod(abc.ABC):
    """A custom hyperparameter search: subclass it and override the event handlers.

    Each handler but `progress` returns the operations to carry out: `Create` (a new trial with hyperparameters),
    `ValidateAfter` (train a trial to a length, in the searcher's `unit`, then validate), `Close` (end a trial once
    its operations are done), `Progress` (the search's progress, 0 to 1) and `Shutdown` (the search is over). A
    search runner (`LocalSearchRunner`, `RemoteSearchRunner`) calls them. To resume after the runner stops,
    override `save_method_state` / `load_method_state`.
    """

    @abc.abstractmethod
    def initial_operations(self, searcher_state: SearcherState) -> List[RunnerOperation]:
        """The operations the search starts with (typically Create and ValidateAfter for the first trials)."""

    @abc.abstractmethod
    def on_trial_created(self, searcher_state: SearcherState, request_id: RequestId) -> List[RunnerOperation]:
        """A trial of a `Create` operation was created."""

    @abc.abstractmethod
    def on_validation_completed(self, searcher_state: SearcherState, request_id: RequestId, metric: Any,
                                train_length: int) -> List[RunnerOperation]:
        """A trial trained to `train_length` (of a ValidateAfter) and validated: `metric` is the searcher metric."""

    @abc.abstractmethod
    def on_trial_closed(self, searcher_state: SearcherState, request_id: RequestId) -> List[RunnerOperation]:
        """A trial ended after a Close operation."""

    @abc.abstractmethod
    def on_trial_exited_early(self, searcher_state: SearcherState, request_id: RequestId,
                              exited_reason: ExitedReason) -> List[RunnerOperation]:
        """A trial stopped before its operations were done (errored, cancelled by a user, or invalid hparams)."""

    @abc.abstractmethod
    def progress(self, searcher_state: SearcherState) -> float:
        """How far the search is, from 0 to 1 (only shown; the search ends with Shutdown)."""

    def save(self, searcher_state: SearcherState, path: pathlib.Path, *, experiment_id: int) -> None:
        """Save the runner's state and the method's own (`save_method_state`) into the directory `path`."""
        data = searcher_state.to_dict()
        data["experimentId"] = experiment_id
        path.joinpath(STATE_FILE).write_text(json.dumps(data))
        self.save_method_state(path)

    def save_method_state(self, path: pathlib.Path) -> None:
        """Save what the method needs to resume into the directory `path` (nothing by default)."""

    def load(self, path: pathlib.Path) -> Tuple[SearcherState, int]:
        """Load what `save` saved: the runner's state and the experiment id (and the method's own state)."""
        data = json.loads(path.joinpath(STATE_FILE).read_text())
        state = SearcherState()
        state.from_dict(data)
        self.load_method_state(path)
        return state, int(data["experimentId"])

    def load_method_state(self, path: pathlib.Path) -> None:
        """Load what `save_method_state` saved in the directory `path` (nothing by default)."""
