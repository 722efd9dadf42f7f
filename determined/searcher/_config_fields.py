"""Checked reads of single fields (lengths, integers) of a canonical searcher config section."""
from typing import Any, Mapping, Optional, Tuple


def config_length(searcher_config: Mapping[str, Any], field: str) -> Tuple[str, int]:
    """The (unit, value) of a canonical length field of the searcher config, checked."""
    length = searcher_config.get(field)
    if not isinstance(length, Mapping) or len(length) != 1:
        raise ValueError(
            f"searcher.{field}: expected a length with exactly one of records, batches or epochs "
            f"(e.g. {{batches: 1000}}), got {length!r}"
        )
    ((unit, value),) = length.items()
    if unit not in ("records", "batches", "epochs") or not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"searcher.{field}: expected {{records|batches|epochs: <int>}}, got {dict(length)!r}")
    return unit, value


def optional_config_length(searcher_config: Mapping[str, Any], field: str) -> Tuple[str, Optional[int]]:
    """`config_length`, or ("batches", None) when the field is absent (Determined 0.38: the trial's code decides)."""
    if searcher_config.get(field) is None:
        return "batches", None
    return config_length(searcher_config, field)


_REQUIRED = object()


def config_int(searcher_config: Mapping[str, Any], field: str, default: Any = _REQUIRED) -> int:
    """An integer field of the searcher config, checked (None or absent gives `default` when one is given)."""
    value = searcher_config.get(field)
    if value is None and default is not _REQUIRED:
        return int(default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"searcher.{field}: the {searcher_config.get('name')} searcher needs an integer {field}, got {value!r}")
    return value
