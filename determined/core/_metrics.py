"""Turning user metric values into JSON the master can store."""
import json
import math
from typing import Any, Dict, List, Optional


def _scalar(value: Any) -> Any:
    """A plain Python value for numpy/torch scalars and 1-element arrays; other values unchanged."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        size = getattr(value, "size", None)
        numel = getattr(value, "numel", None)
        count = numel() if callable(numel) else (size if isinstance(size, int) else 1)
        if count == 1:
            try:
                return item()
            except (TypeError, ValueError, RuntimeError):
                pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def clean_value(value: Any) -> Any:
    """A JSON-serialisable version of one metric value: NaN and infinities become None."""
    kind = type(value)
    if kind is float:  # what most metrics are by now: no further look
        return value if math.isfinite(value) else None
    if kind is int or kind is str:
        return value
    value = _scalar(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"metric value {value!r} of type {type(value).__name__} is not a number nor JSON-serialisable; "
            "report numbers (python, numpy or torch scalars), strings, or lists/dicts of them"
        ) from None
    return value


def clean_metrics(metrics: Dict[str, Any]) -> Dict[str, Any]:
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics must be a dict of name -> value, got {type(metrics).__name__}")
    return {str(k): clean_value(v) for k, v in metrics.items()}


def clean_batch_metrics(batch_metrics: Optional[List[Dict[str, Any]]]) -> Optional[List[Dict[str, Any]]]:
    if batch_metrics is None:
        return None
    return [clean_metrics(m) for m in batch_metrics]
