"""The enums of the 0.38 SDK: orders, sort keys, states and checkpoint download modes."""
import enum
from typing import Any, Optional, Type, TypeVar

from determined.experimental.client._common import UsageError

E = TypeVar("E", bound=enum.Enum)


class OrderBy(enum.Enum):
    """Ascending or descending order (ASC/ASCENDING, DESC/DESCENDING)."""

    ASCENDING = 1
    ASC = 1
    DESCENDING = 2
    DESC = 2


class ExperimentSortBy(enum.Enum):
    """The field to sort a list of experiments on."""

    ID = "id"
    NAME = "name"
    DESCRIPTION = "description"
    START_TIME = "start_time"
    END_TIME = "end_time"
    STATE = "state"
    NUM_TRIALS = "num_trials"
    PROGRESS = "progress"
    USER = "owner"


class TrialSortBy(enum.Enum):
    """The field to sort a list of trials on."""

    ID = "id"
    START_TIME = "start_time"
    END_TIME = "end_time"
    STATE = "state"
    BEST_VALIDATION_METRIC = "best_validation"
    BATCHES_PROCESSED = "total_batches"
    RESTARTS = "restarts"


class CheckpointSortBy(enum.Enum):
    """The field to sort a list of checkpoints on (SEARCHER_METRIC: the searcher's metric, in its direction)."""

    UUID = "uuid"
    TRIAL_ID = "trial_id"
    BATCH_NUMBER = "steps_completed"
    END_TIME = "end_time"
    STATE = "state"
    SEARCHER_METRIC = "searcher_metric"


class _State(str, enum.Enum):
    """A state, equal to its name as text too (`CheckpointState.COMPLETED == "COMPLETED"`), and shown as it."""

    def __str__(self) -> str:
        return str(self.value)


class ExperimentState(_State):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_ERROR = "STOPPING_ERROR"
    STOPPING_KILLED = "STOPPING_KILLED"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"
    DELETED = "DELETED"


class TrialState(_State):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_ERROR = "STOPPING_ERROR"
    STOPPING_KILLED = "STOPPING_KILLED"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"


class CheckpointState(_State):
    ACTIVE = "ACTIVE"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    DELETED = "DELETED"
    PARTIALLY_DELETED = "PARTIALLY_DELETED"


class DownloadMode(enum.Enum):
    """How Checkpoint.download() gets the files: DIRECT from the checkpoint storage, MASTER streamed by the master,
    AUTO (default) DIRECT when this machine can read the storage, else MASTER."""

    DIRECT = "direct"
    MASTER = "master"
    AUTO = "auto"


def member(enum_cls: Type[E], value: Any, what: str) -> E:
    """`value` as a member of `enum_cls` (a member, its name in any case, a state's `STATE_` name, or its value)."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        name = value.upper()
        name = name[len("STATE_"):] if name.startswith("STATE_") else name
        if name in enum_cls.__members__:
            return enum_cls[name]
    for m in enum_cls:
        if m.value == value and not isinstance(value, bool):
            return m
    names = ", ".join(f"{enum_cls.__name__}.{n}" for n in enum_cls.__members__)
    raise UsageError(f"{what} must be one of {names}, not {value!r}")


def state_of(enum_cls: Type[E], text: Any) -> Any:
    """The enum member of a state the master sent; the text itself for a state this SDK does not know."""
    try:
        return member(enum_cls, text, "state")
    except UsageError:
        return text


class ModelSortBy(enum.Enum):
    """The field to sort a list of models on."""

    UNSPECIFIED = 0
    NAME = 1
    DESCRIPTION = 2
    CREATION_TIME = 4
    LAST_UPDATED_TIME = 5


ModelOrderBy = OrderBy  # the per-class name of 0.13 (0.38: OrderBy)


def sort_by_param(sort_by: Any) -> Optional[str]:
    """The `sort_by` query value of a ModelSortBy (or its name); None for UNSPECIFIED."""
    found = member(ModelSortBy, sort_by, "sort_by")
    return None if found is ModelSortBy.UNSPECIFIED else found.name.lower()


def order_by_param(order_by: Any) -> str:
    found = member(ModelOrderBy, order_by, "order_by")
    return "asc" if found is ModelOrderBy.ASCENDING else "desc"
