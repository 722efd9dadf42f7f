"""Choosing checkpoints by a validation metric, in determined.common.checkpoint_order's order (GC's too)."""
from typing import Any, Dict, List, Optional, Tuple

from determined import errors
from determined.common import checkpoint_order
from determined.experimental.client._common import UsageError


def criteria(config: Dict[str, Any], sort_by: Optional[str], smaller_is_better: Optional[bool]) -> Tuple[str, bool]:
    """The metric and direction to rank by: the searcher's unless `sort_by` is given.

    With `sort_by` unset, `smaller_is_better` is ignored (the searcher's is used); with `sort_by` set and
    `smaller_is_better` unset, the searcher's direction is used.
    """
    searcher = config.get("searcher") or {}
    default_sib = bool(searcher.get("smaller_is_better", True))
    if sort_by is None:
        return str(searcher["metric"]), default_sib
    if not isinstance(sort_by, str) or not sort_by:
        raise UsageError(f"sort_by must be the name of a validation metric, not {sort_by!r}")
    if smaller_is_better is None:
        return sort_by, default_sib
    return sort_by, bool(smaller_is_better)


def _metric_of(ckpt: Dict[str, Any], metric: str) -> Optional[float]:
    return checkpoint_order.metric_value((ckpt.get("validation_metrics") or {}).get(metric))


def key(ckpt: Dict[str, Any], metric: str, smaller_is_better: bool) -> checkpoint_order.CheckpointKey:
    """The sort key of a checkpoint's JSON by `metric`: the best first, ties broken as checkpoint_order says."""
    return checkpoint_order.checkpoint_key(_metric_of(ckpt, metric), smaller_is_better, ckpt.get("steps_completed"),
                                           int(ckpt.get("trial_id") or 0), ckpt["uuid"])


def ranked(checkpoints: List[Dict[str, Any]], metric: str, smaller_is_better: bool) -> List[Dict[str, Any]]:
    """COMPLETED checkpoints that have `metric` among their validation metrics, best first.

    Ties: more batches first, then the lower trial id, then the uuid (determined.common.checkpoint_order).
    """
    scored = [c for c in checkpoints if c.get("state") == "COMPLETED" and _metric_of(c, metric) is not None]
    return sorted(scored, key=lambda c: key(c, metric, smaller_is_better))


def best_per_trial(checkpoints: List[Dict[str, Any]], metric: str, smaller_is_better: bool) -> List[Dict[str, Any]]:
    """The best checkpoint of every trial, the trials' bests ordered best first."""
    seen = set()
    out = []
    for c in ranked(checkpoints, metric, smaller_is_better):
        if c["trial_id"] not in seen:
            seen.add(c["trial_id"])
            out.append(c)
    return out


def none_found(what: str, metric: str, checkpoints: List[Dict[str, Any]]) -> errors.DeterminedError:
    completed = [c for c in checkpoints if c.get("state") == "COMPLETED"]
    if not completed:
        return errors.DeterminedError(f"{what} has no COMPLETED checkpoints")
    names = sorted({k for c in completed for k in (c.get("validation_metrics") or {})})
    return errors.DeterminedError(
        f"no COMPLETED checkpoint of {what} has the validation metric {metric!r}; "
        + (f"the validated checkpoints have: {', '.join(names)}" if names
           else "none of its checkpoints was taken at a validation (set min_checkpoint_period to the validation period)")
    )
