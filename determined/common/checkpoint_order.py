"""The one order of "best": which checkpoint, and which validation, comes first by a metric.

Every reader that says "best" uses it: checkpoint GC (`save_experiment_best`, `save_trial_best`), the SDK
(`top_checkpoint`, `top_n_checkpoints`, `select_checkpoint(best=True)`, `list_checkpoints()` by the searcher
metric), `det checkpoint list --best`, and the "Best trial" / "Best checkpoint" lines at the end of a run.
docs/sdk.md ("Which checkpoint is best") describes it for users. Best first:

1. a checkpoint with a value of the metric (a finite or infinite number; not NaN, not a boolean) before one without;
2. the value, in the metric's direction (smaller first when smaller is better);
3. more batches (`steps_completed`) first: of two equally good models, the one trained longer;
4. the lower trial id first;
5. the uuid, in ascending text order: it makes the order total, so no reader depends on the order rows came in.

A checkpoint's value is the metric of the validation reported at its trial and steps (the last such report).
Only COMPLETED checkpoints are ever "best": the callers filter by state, this module only orders. Validations
(for "Best trial") rank by the first four keys.
"""
import math
from typing import Any, Optional, Tuple

ValidationKey = Tuple[int, float, int, int]
CheckpointKey = Tuple[int, float, int, int, str]


def metric_value(value: Any) -> Optional[float]:
    """`value` as a metric value that ranks, or None: a number that is not NaN and not a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def validation_key(value: Any, smaller_is_better: bool, steps_completed: Optional[int], trial_id: int) -> ValidationKey:
    """Sort key of a validation (its metric's raw value, its steps and trial): the best sorts first."""
    ranked = metric_value(value)
    steps = int(steps_completed or 0)
    if ranked is None:
        return (1, 0.0, -steps, int(trial_id))
    return (0, ranked if smaller_is_better else -ranked, -steps, int(trial_id))


def checkpoint_key(value: Any, smaller_is_better: bool, steps_completed: Optional[int], trial_id: int,
                   uuid: str) -> CheckpointKey:
    """Sort key of a checkpoint (the metric's raw value at its steps, or None): the best sorts first."""
    return (*validation_key(value, smaller_is_better, steps_completed, trial_id), str(uuid))
