"""Checks of what users send in a request body: its known fields, names, descriptions and metadata.

Each raises RequestProblem (400) naming the field and what to send instead; shared by the model registry,
workspaces and projects, templates, trial sources and the trial protocol.
"""
import json
import math
from typing import Any, Dict, Iterable, Mapping

from determined.master.problems import RequestProblem
from determined.master.registry import names

MAX_METADATA_BYTES = 512 * 1024


# ---------------------------------------------------------------- validation


def check_name(name: Any) -> str:
    """A model name: see names.NAME_RULE."""
    return names.check_name(name, "name", "model name")


def check_metadata(value: Any, field: str = "metadata") -> Dict[str, Any]:
    """A metadata value: a JSON object (string keys) with no NaN or infinite numbers, at most MAX_METADATA_BYTES."""
    if not isinstance(value, Mapping):
        raise RequestProblem(400, f"invalid {field}", [
            f"{field}: expected a JSON object (e.g. {{\"key\": \"value\"}}), got {_json_type(value)}"])
    _check_finite(value, field)
    check_metadata_size(value, field)
    return dict(value)


def check_metadata_size(value: Any, field: str = "metadata") -> None:
    size = len(json.dumps(value, separators=(",", ":")))
    if size > MAX_METADATA_BYTES:
        raise RequestProblem(400, f"invalid {field}", [
            f"{field}: {size} bytes of JSON; at most {MAX_METADATA_BYTES} are allowed (keep large data in the "
            "checkpoint's files)"])


def _check_finite(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise RequestProblem(400, "invalid metadata", [f"{path}: {value} cannot be stored; use a finite number or null"])
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, f"{path}[{index}]")


def check_description(value: Any) -> str:
    return names.check_description(value)


def check_body(body: Any, allowed: Iterable[str], what: str) -> Dict[str, Any]:
    """The request body as a dict, refusing anything but an object with the `allowed` keys."""
    allowed = sorted(allowed)
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise RequestProblem(400, f"invalid {what}", [f"body: expected a JSON object, got {_json_type(body)}"])
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise RequestProblem(400, f"invalid {what}", [f"{key}: unknown field; allowed: {', '.join(allowed)}" for key in unknown])
    return dict(body)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
