"""context.wrap_reducer: MetricReducers and reducer functions, reset per period, merged into the reports,
reduced per slot then across slots."""
import pathlib
from typing import Any, Dict, List

import pytest

import determined.pytorch as det_torch
from determined import errors
from determined.pytorch._metric_reducer import ReducerRegistry
from _pytorch_runs import make_config, run_trial
from _hook_trials import HookTrial, RecordsReducer
from _trials import DropoutTrial, random_dataset


def test_reducer_metrics_are_merged_into_training_and_validation_reports(ckpt_dir: pathlib.Path) -> None:
    config = make_config(scheduling_unit=3, hyperparameters={"global_batch_size": 4, "lr": 0.1})
    context = run_trial(HookTrial, ckpt_dir, [7], config=config)
    # Reset before every training period: 3, 3 and 1 batches of 4 records.
    assert [r["metrics"]["records"] for r in context.train.training_history] == [12, 12, 4]
    [validation] = context.train.validation_history
    labels = random_dataset(10, seed=1).tensors[1]
    assert validation["metrics"]["records"] == 10  # for_validation too, and reset after training
    assert validation["metrics"]["label_share"] == pytest.approx(float(labels.sum()) / 10)


def test_cross_slot_reduction_over_two_slots_by_hand() -> None:
    """Two slots' registries as the controller drives them: every slot reduces, the lists are gathered in
    rank order, the reducer function sees the values interleaved back in batch order."""
    slots = [ReducerRegistry(), ReducerRegistry()]
    seen: List[Any] = []

    def ordered(values: List[int]) -> float:
        seen.extend(values)
        return float(sum(values))

    wrapped = [(s.wrap(RecordsReducer()), s.wrap(ordered, name="batches")) for s in slots]
    for registry in slots:
        registry.reset()
    # 5 batches: slot r gets batches r, r + 2, ... (3 on slot 0, 2 on slot 1), of 4 records but the last of 2.
    for batch in range(5):
        records, function = wrapped[batch % 2]
        records.update(2 if batch == 4 else 4)
        function.update(batch)
    gathered = [registry.per_slot(for_training=True) for registry in slots]
    assert gathered == [[10, [0, 2, 4]], [8, [1, 3]]]
    assert slots[0].cross_slot(True, gathered) == {"records": 18, "batches": 10.0}
    assert seen == [0, 1, 2, 3, 4]


def test_a_reducer_for_validation_only_is_left_out_of_training(ckpt_dir: pathlib.Path) -> None:
    class ValidationOnly(DropoutTrial):
        def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
            super().__init__(context)
            self.count = context.wrap_reducer(len, name="evaluated", for_training=False)

        def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
            self.count.update(1)
            return {}  # every validation metric comes from reducers

        def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Dict[str, Any]:
            self.count.update(1)
            return super().train_batch(batch, epoch_idx, batch_idx)

    context = run_trial(ValidationOnly, ckpt_dir, [3], config=make_config(metric="evaluated"))
    assert "evaluated" not in context.train.training_history[-1]["metrics"]
    assert context.train.validation_history[-1]["metrics"] == {"evaluated": 2}  # 8 records in batches of 4


@pytest.mark.parametrize("name, result, message", [
    (None, 3.0, "wrapped with name=None, so it must return a dict"),
    ("x", {"x": 1}, "wrapped with name='x' but returned a dict"),
])
def test_reducer_results_of_the_wrong_shape_are_clear_errors(name: Any, result: Any, message: str) -> None:
    registry = ReducerRegistry()
    registry.wrap(lambda values: result, name=name)
    with pytest.raises(errors.InvalidTrialError, match=message):
        registry.reduce(True, lambda value: [value])


def test_wrap_reducer_refuses_bad_input() -> None:
    registry = ReducerRegistry()
    reducer = RecordsReducer()
    registry.wrap(reducer)
    with pytest.raises(errors.InvalidTrialError, match="the same reducer"):
        registry.wrap(reducer)
    with pytest.raises(errors.InvalidTrialError, match="takes a function"):
        registry.wrap(42)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidTrialError, match="would never report"):
        registry.wrap(len, for_training=False, for_validation=False)


def test_a_failing_reducer_is_named_in_the_error() -> None:
    class Broken(RecordsReducer):
        def per_slot_reduce(self) -> int:
            raise KeyError("oops")

    registry = ReducerRegistry()
    registry.wrap(Broken(), name="broken")
    with pytest.raises(errors.InvalidTrialError, match="MetricReducer Broken .*name='broken'.* per_slot_reduce"):
        registry.reduce(False, lambda value: [value])


def test_simple_reducer_is_the_function_reducer_that_wrap_reducer_returns() -> None:
    """Determined 0.14-0.38's `det.pytorch._SimpleReducer`: code of that era imports it and casts wrap_reducer()'s
    result for a function to it (0.26.0's byol_pytorch). It reduces two slots' values in batch order."""
    from determined.pytorch import _SimpleReducer

    reducer = ReducerRegistry().wrap(lambda xs: sum(xs) / len(xs), name="cls_loss")
    assert isinstance(reducer, _SimpleReducer) and isinstance(reducer, det_torch.MetricReducer)
    for value in (1.0, 3.0):
        reducer.update(value)
    other = _SimpleReducer(lambda xs: xs)
    other.update(2.0)
    assert other.cross_slot_reduce([reducer.per_slot_reduce(), other.per_slot_reduce()]) == [1.0, 2.0, 3.0]
    assert reducer.cross_slot_reduce([reducer.per_slot_reduce(), [2.0]]) == pytest.approx(2.0)
