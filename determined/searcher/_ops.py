"""Operations a search method asks the master to carry out."""
import dataclasses
from typing import Any, Dict, Optional, Union


@dataclasses.dataclass(frozen=True)
class Create:
    """Create a trial with these hyperparameter values.

    `checkpoint` names where the trial starts from: `{"request_id": <parent>}` means the latest checkpoint of
    another trial of the same experiment (a PBT clone), `{"uuid": <uuid>}` a given checkpoint (a warm start).
    """

    request_id: str
    hparams: Dict[str, Any]
    checkpoint: Optional[Dict[str, Any]] = None


@dataclasses.dataclass(frozen=True)
class ValidateAfter:
    """Train the trial until `length` (cumulative, in the searcher's config unit), then validate and report."""

    request_id: str
    length: int


@dataclasses.dataclass(frozen=True)
class Close:
    """End the trial once the operations queued before this one are done.

    A trial that runs its own loop (Determined 0.38: no operations) is stopped now: the master delivers the
    graceful preemption signal, and the trial ends COMPLETED when its process exits.
    """

    request_id: str


@dataclasses.dataclass(frozen=True)
class Shutdown:
    """The search is over; `failure` marks the experiment as failed, `message` says why (shown to the user);
    `cancel` (a custom search, 0.26) ends it CANCELED."""

    failure: bool = False
    message: str = ""
    cancel: bool = False


@dataclasses.dataclass(frozen=True)
class Progress:
    """How far the search is, from 0 to 1: what a custom search method (0.19.6 to 0.37) reports to the master.

    Only a custom search posts it; the master's `custom` method takes it in, and no other method returns it."""

    progress: float


Operation = Union[Create, ValidateAfter, Close, Shutdown]

_KINDS = {"create": Create, "validate_after": ValidateAfter, "close": Close, "shutdown": Shutdown, "progress": Progress}
_NAMES = {cls: name for name, cls in _KINDS.items()}


def operation_to_dict(op: Union[Operation, Progress]) -> Dict[str, Any]:
    """A JSON form of an operation, e.g. for the master's event journal (request ids as text: a custom search
    method may give uuid.UUID ones)."""
    fields = dataclasses.asdict(op)
    if "request_id" in fields:
        fields["request_id"] = str(fields["request_id"])
    return {"kind": _NAMES[_kind_of(op)], **fields}


def _kind_of(op: Any) -> type:
    """The operation class of `op` (a subclass, e.g. a face of Determined 0.2x's API, counts as its base)."""
    for cls in type(op).__mro__:
        if cls in _NAMES:
            return cls
    raise TypeError(f"not a searcher operation: {op!r}")


def operation_from_dict(data: Dict[str, Any]) -> Union[Operation, Progress]:
    fields = dict(data)
    kind = fields.pop("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown searcher operation kind {kind!r}; expected one of {sorted(_KINDS)}")
    return _KINDS[kind](**fields)  # type: ignore[arg-type]
