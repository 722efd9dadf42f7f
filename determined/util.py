"""Helpers that Determined's examples import from ``determined.util`` (0.12 to 0.38).

Trial code of those releases reads its data from Google Cloud Storage with ``download_gcs_blob_with_backoff`` and
merges DeepSpeed configs with ``merge_dicts``; ``is_overridden`` tells whether a Trial subclass overrides a method.
"""
import copy
import random
import time
from typing import Any, Callable, Dict

__all__ = ["download_gcs_blob_with_backoff", "is_overridden", "merge_dicts"]


def download_gcs_blob_with_backoff(blob: Any, n_retries: int = 32, max_backoff: int = 32,
                                   _sleep: Callable[[float], None] = time.sleep) -> Any:
    """The bytes of a ``google.cloud.storage`` blob (``blob.download_as_string()``), retried up to ``n_retries``
    times with exponential back-off capped at ``max_backoff`` seconds.

    The back-off's jitter does not draw from the trial's random state: a trial seeded for reproducibility gets the
    same random numbers whether a download needed retries or not.
    """
    download = getattr(blob, "download_as_bytes", None) or getattr(blob, "download_as_string", None)
    if download is None:
        raise TypeError(f"download_gcs_blob_with_backoff() takes a google.cloud.storage Blob, got "
                        f"{type(blob).__name__}")
    jitter = random.Random()
    last: BaseException = RuntimeError("n_retries must be at least 1")
    for attempt in range(n_retries):
        try:
            return download()
        except Exception as e:  # transient GCS errors: retry
            last = e
            if attempt + 1 < n_retries:
                _sleep(min(2 ** attempt + jitter.random(), max_backoff))
    raise RuntimeError(f"downloading {getattr(blob, 'name', 'the blob')!r} failed {n_retries} time(s); "
                       f"last error: {last}") from last


def is_overridden(full_method: Any, parent_class: type) -> bool:
    """Whether ``full_method`` (a bound or unbound method) is defined by a class other than ``parent_class``.

    Something that is not callable (a name the subclass set to a value) counts as not overridden.
    """
    if not callable(full_method):
        return False
    owner = str(getattr(full_method, "__qualname__", "")).rsplit(".", 2)[-2:][0]  # "...Class.method" -> Class
    return owner != parent_class.__name__


def merge_dicts(base_dict: Dict[Any, Any], source_dict: Dict[Any, Any]) -> Dict[Any, Any]:
    """A new dict: ``base_dict`` with ``source_dict``'s values merged in, recursively for keys whose values are
    dicts on both sides; neither input is changed."""
    merged = copy.deepcopy(base_dict)
    for key, value in source_dict.items():
        if key in base_dict and isinstance(value, dict) and isinstance(base_dict[key], dict):
            merged[key] = merge_dicts(base_dict[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
