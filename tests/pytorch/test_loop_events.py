"""The training loop looks at its reports, validations, checkpoints and stops only when one can be due
(determined/_trial_loop.py `_quiet_until`): it must do them at exactly the batches it did when it looked after
every batch, and still notice a preemption between them."""
import pathlib
import time
from typing import Any, Dict, List, Tuple

import pytest

from _pytorch_runs import make_config, run_trial
import _trials
from determined import _trial_loop
from determined.core import PreemptContext


def _events(context: Any) -> Tuple[List[int], List[int], List[int], List[Dict[str, Any]]]:
    return ([r["steps_completed"] for r in context.train.training_history],
            [r["steps_completed"] for r in context.train.validation_history],
            [c["steps_completed"] for c in context.checkpoint.reported],
            context.searcher.completed_operations)


@pytest.mark.parametrize("periods", [
    {"scheduling_unit": 3, "min_validation_period": {"batches": 5}, "min_checkpoint_period": {"batches": 7}},
    {"scheduling_unit": 4, "min_validation_period": {"batches": 4}, "perform_initial_validation": True},
    {"scheduling_unit": 100, "min_checkpoint_period": {"batches": 6}, "records_per_epoch": 20},
])
def test_events_fall_on_the_same_batches_as_when_looking_after_every_batch(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, periods: Dict[str, Any]) -> None:
    config = make_config(**periods)
    lengths = [11, 23]  # two searcher operations
    quiet = _events(run_trial(_trials.DropoutTrial, tmp_path / "quiet", lengths, config=config))
    monkeypatch.setattr(_trial_loop, "QUIET_LOOK_S", 0.0)
    looked = _events(run_trial(_trials.DropoutTrial, tmp_path / "looked", lengths, config=config))
    assert quiet == looked
    reports, validations, checkpoints, completed = quiet
    unit = periods["scheduling_unit"]
    assert all(b - a <= unit for a, b in zip([0] + reports, reports)) and reports[-1] == 23
    assert [op["length"] for op in completed] == [11, 23] and validations[-1] == 23 and checkpoints[-1] == 23


class _SlowTrial(_trials.DropoutTrial):
    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
        time.sleep(0.02)
        return super().train_batch(batch, epoch_idx, batch_idx)


def test_a_preemption_between_events_is_noticed(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: List[float] = []

    def preempted(self: Any, auto_ack: bool = True) -> bool:
        asked.append(time.monotonic())
        return len(asked) > 1  # the master asks only after the loop first looked (after batch 1)

    monkeypatch.setattr(PreemptContext, "should_preempt", preempted)
    config = make_config(scheduling_unit=100000)  # no event due before the end of the operation
    context = run_trial(_SlowTrial, tmp_path, [100000], config=config)
    checkpoints = [c["steps_completed"] for c in context.checkpoint.reported]
    # it stopped long before the end, with a checkpoint of where it was, and asked once or twice, not per batch
    assert len(checkpoints) == 1 and 1 < checkpoints[0] < 100000
    assert len(asked) == 2 and asked[1] - asked[0] >= _trial_loop.QUIET_LOOK_S
    assert context.searcher.completed_operations == []
