"""The JSON a custom search's runner and the master exchange (Determined 0.19.6 to 0.37's searcher events and
operations): events out of the master, operations into it. Pure: both sides use it, neither does I/O here.

An event is `{"id": <int>, <kind>: {...}}` with kind one of EVENT_KINDS; an operation is one of
`{"createTrial": {"requestId", "hyperparams" (JSON text or object), "checkpoint"?: {"uuid"}}}`,
`{"trialOperation": {"validateAfter": {"requestId", "length"}}}`, `{"closeTrial": {"requestId"}}`,
`{"shutDown": {"cancel", "failure"}}`, `{"setSearcherProgress": {"progress"}}`.
"""
import json
import math
from typing import Any, Dict, List, Mapping, Union

from determined.searcher._ops import Close, Create, Operation, Progress, Shutdown, ValidateAfter

EVENT_KINDS = ("initialOperations", "trialCreated", "validationCompleted", "trialProgress", "trialClosed",
               "trialExitedEarly", "experimentInactive")

# Bounds on what a runner may post in one request (a server takes hostile input).
MAX_OPERATIONS = 10_000
MAX_REQUEST_ID = 128
MAX_HPARAMS_TEXT = 1 << 20
MAX_LENGTH = 10**12


class WireError(ValueError):
    """A posted operation that is not one the master understands; the message names the field and the fix."""


def event(event_id: int, kind: str, **fields: Any) -> Dict[str, Any]:
    """One event in its JSON form."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown searcher event kind {kind!r}")
    return {"id": int(event_id), kind: dict(fields)}


def event_kind(data: Mapping[str, Any]) -> str:
    """The kind of an event in its JSON form."""
    for kind in EVENT_KINDS:
        if data.get(kind) is not None:
            return kind
    raise ValueError(f"not a searcher event: {dict(data)!r}")


def operation_to_wire(op: Union[Operation, Progress]) -> Dict[str, Any]:
    """An operation as a runner posts it."""
    if isinstance(op, Create):
        body: Dict[str, Any] = {"requestId": str(op.request_id), "hyperparams": json.dumps(op.hparams)}
        checkpoint = _checkpoint_ref(op.checkpoint)
        if checkpoint is not None:
            body["checkpoint"] = checkpoint
        return {"createTrial": body}
    if isinstance(op, ValidateAfter):
        return {"trialOperation": {"validateAfter": {"requestId": str(op.request_id), "length": str(int(op.length))}}}
    if isinstance(op, Close):
        return {"closeTrial": {"requestId": str(op.request_id)}}
    if isinstance(op, Shutdown):
        return {"shutDown": {"cancel": bool(op.cancel), "failure": bool(op.failure)}}
    if isinstance(op, Progress):
        return {"setSearcherProgress": {"progress": float(op.progress)}}
    raise TypeError(f"not a searcher operation: {op!r} (use Create, ValidateAfter, Close, Shutdown or Progress)")


def _checkpoint_ref(checkpoint: Any) -> Any:
    """`Create.checkpoint` as JSON: a mapping as it is, a client Checkpoint (anything with a `uuid`) by its uuid."""
    if checkpoint is None or isinstance(checkpoint, Mapping):
        return dict(checkpoint) if checkpoint is not None else None
    uuid = getattr(checkpoint, "uuid", None)
    if not isinstance(uuid, str):
        raise TypeError(f"Create.checkpoint: expected None, a Checkpoint or {{'uuid': ...}}, got {checkpoint!r}")
    return {"uuid": uuid}


def operations_from_wire(data: Any) -> List[Union[Operation, Progress]]:
    """Posted operations, checked; WireError names the first problem."""
    if not isinstance(data, list):
        raise WireError("searcherOperations: expected a list of operations")
    if len(data) > MAX_OPERATIONS:
        raise WireError(f"searcherOperations: {len(data)} operations, more than {MAX_OPERATIONS} in one request; "
                        "post fewer at a time")
    return [_operation_from_wire(item, f"searcherOperations[{i}]") for i, item in enumerate(data)]


def _operation_from_wire(item: Any, where: str) -> Union[Operation, Progress]:
    if not isinstance(item, Mapping):
        raise WireError(f"{where}: expected an object, got {type(item).__name__}")
    kinds = [k for k, v in item.items() if v is not None]
    if len(kinds) != 1:
        raise WireError(f"{where}: expected exactly one of createTrial, trialOperation, closeTrial, shutDown, "
                        f"setSearcherProgress; got {sorted(kinds)}")
    kind, body = kinds[0], item[kinds[0]]
    if not isinstance(body, Mapping):
        raise WireError(f"{where}.{kind}: expected an object")
    if kind == "createTrial":
        return Create(_request_id(body, f"{where}.createTrial"), _hparams(body.get("hyperparams"), where),
                      _checkpoint(body.get("checkpoint"), where))
    if kind == "trialOperation":
        validate = body.get("validateAfter")
        if not isinstance(validate, Mapping):
            raise WireError(f"{where}.trialOperation: expected {{validateAfter: {{requestId, length}}}}")
        return ValidateAfter(_request_id(validate, f"{where}.trialOperation.validateAfter"),
                             _length(validate.get("length"), where))
    if kind == "closeTrial":
        return Close(_request_id(body, f"{where}.closeTrial"))
    if kind == "shutDown":
        return Shutdown(failure=body.get("failure") is True, cancel=body.get("cancel") is True)
    if kind == "setSearcherProgress":
        value = body.get("progress")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise WireError(f"{where}.setSearcherProgress.progress: expected a number from 0 to 1, got {value!r}")
        return Progress(float(value))
    raise WireError(f"{where}: unknown operation {kind!r}; use createTrial, trialOperation, closeTrial, shutDown or "
                    "setSearcherProgress")


def _request_id(body: Mapping[str, Any], where: str) -> str:
    value = body.get("requestId")
    if not isinstance(value, str) or not value or len(value) > MAX_REQUEST_ID:
        raise WireError(f"{where}.requestId: expected a non-empty string of at most {MAX_REQUEST_ID} characters "
                        "(e.g. str(uuid.uuid4()))")
    return value


def _hparams(value: Any, where: str) -> Dict[str, Any]:
    if isinstance(value, str):
        if len(value) > MAX_HPARAMS_TEXT:
            raise WireError(f"{where}.createTrial.hyperparams: more than {MAX_HPARAMS_TEXT} characters")
        try:
            value = json.loads(value)
        except ValueError:
            raise WireError(f"{where}.createTrial.hyperparams: not valid JSON text") from None
    if not isinstance(value, dict):
        raise WireError(f"{where}.createTrial.hyperparams: expected a mapping of hyperparameter names to values")
    return value


def _checkpoint(value: Any, where: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("uuid"), str) or len(value) != 1:
        raise WireError(f"{where}.createTrial.checkpoint: expected {{uuid: <checkpoint uuid>}}")
    return {"uuid": value["uuid"]}


def _length(value: Any, where: str) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LENGTH:
        raise WireError(f"{where}.trialOperation.validateAfter.length: expected a positive integer, got {value!r}")
    return value
