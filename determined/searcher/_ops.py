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
    """The search is over; `failure` marks the experiment as failed, `message` says why (shown to the user)."""

    failure: bool = False
    message: str = ""


Operation = Union[Create, ValidateAfter, Close, Shutdown]

_KINDS = {"create": Create, "validate_after": ValidateAfter, "close": Close, "shutdown": Shutdown}
_NAMES = {cls: name for name, cls in _KINDS.items()}


def operation_to_dict(op: Operation) -> Dict[str, Any]:
    """A JSON form of an operation, e.g. for the master's event journal."""
    return {"kind": _NAMES[type(op)], **dataclasses.asdict(op)}


def operation_from_dict(data: Dict[str, Any]) -> Operation:
    fields = dict(data)
    kind = fields.pop("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown searcher operation kind {kind!r}; expected one of {sorted(_KINDS)}")
    return _KINDS[kind](**fields)  # type: ignore[arg-type]
