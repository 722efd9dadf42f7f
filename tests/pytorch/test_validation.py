"""Validation: reducers, evaluate_full_dataset, eval mode, and the errors a trial can get wrong."""
import pathlib
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from torch import nn

from _pytorch_runs import make_config, run_trial
import _trials
import determined.pytorch as det_torch
from determined import errors
from determined.pytorch._reducer import Reducer, combine_partials


class _Base(det_torch.PyTorchTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(4, 2), nn.Dropout(0.5)))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(_trials.random_dataset(8), batch_size=4)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        # Records 1..10 in batches of 3: batch sums 6, 15, 24, 10 (the last batch has one record).
        return det_torch.DataLoader(torch.arange(1.0, 11.0).reshape(10, 1), batch_size=3)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return loss


class ReducerTrial(_Base):
    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        assert not self.model.training and not torch.is_grad_enabled()
        total = batch.sum()
        return {"avg": total, "sum": total, "max": total.item(), "min": np.float32(total.item()),
                "default": total, "vec": torch.stack([total, -total])}

    def evaluation_reducer(self) -> Dict[str, det_torch.Reducer]:
        return {"avg": Reducer.AVG, "sum": Reducer.SUM, "max": Reducer.MAX, "min": Reducer.MIN,
                "vec": Reducer.MAX}


def test_every_reducer(tmp_path: pathlib.Path) -> None:
    context = run_trial(ReducerTrial, tmp_path, [2], make_config(metric="avg"))
    metrics = context.train.validation_history[-1]["metrics"]
    assert metrics == {"avg": 13.75, "sum": 55.0, "max": 24.0, "min": 6.0, "default": 13.75, "vec": [24.0, -6.0]}


class SingleReducerTrial(ReducerTrial):
    def evaluation_reducer(self) -> det_torch.Reducer:
        return Reducer.SUM


def test_single_reducer_for_all_metrics(tmp_path: pathlib.Path) -> None:
    context = run_trial(SingleReducerTrial, tmp_path, [2], make_config(metric="avg"))
    metrics = context.train.validation_history[-1]["metrics"]
    assert metrics["avg"] == metrics["max"] == metrics["default"] == 55.0
    assert metrics["vec"] == [55.0, -55.0]


def test_cross_rank_average_is_weighted_by_batches() -> None:
    assert combine_partials(Reducer.AVG, [(2.0, 3), (6.0, 1)]) == 3.0
    assert combine_partials(Reducer.SUM, [(2.0, 3), (6.0, 1)]) == 8.0
    assert combine_partials(Reducer.MAX, [(2.0, 3), (6.0, 1), (9.0, 0)]) == 6.0
    assert combine_partials(Reducer.MIN, [(2.0, 3), (6.0, 1)]) == 2.0


class FullDatasetTrial(_Base):
    loaders: List[Any] = []

    def evaluate_full_dataset(self, data_loader: torch.utils.data.DataLoader) -> Dict[str, Any]:
        assert not self.model.training
        self.loaders.append(data_loader)
        values = torch.cat([b.flatten() for b in data_loader])
        return {"mean": values.mean(), "count": len(values), "batches": len(data_loader)}


def test_evaluate_full_dataset(tmp_path: pathlib.Path) -> None:
    context = run_trial(FullDatasetTrial, tmp_path, [3], make_config(metric="mean"))
    assert context.train.validation_history == [{"steps_completed": 3, "metrics": {"mean": 5.5, "count": 10, "batches": 4}}]
    assert isinstance(FullDatasetTrial.loaders[-1], torch.utils.data.DataLoader)


class BothTrial(ReducerTrial, FullDatasetTrial):
    pass


class NeitherTrial(_Base):
    pass


@pytest.mark.parametrize("trial_class", [BothTrial, NeitherTrial])
def test_both_or_neither_evaluate_method_is_an_error_naming_the_class(
    trial_class: Any, tmp_path: pathlib.Path
) -> None:
    with pytest.raises(errors.InvalidTrialError, match=trial_class.__name__ + ".*exactly one"):
        run_trial(trial_class, tmp_path, [1])


class TorchLoaderTrial(ReducerTrial):
    def build_training_data_loader(self) -> Any:
        return torch.utils.data.DataLoader(_trials.random_dataset(8), batch_size=4)


def test_plain_torch_data_loader_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="determined.pytorch.DataLoader"):
        run_trial(TorchLoaderTrial, tmp_path, [1])


def test_missing_searcher_metric_names_the_metrics_that_exist(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="'accuracy'.*avg, default, max, min, sum, vec"):
        run_trial(ReducerTrial, tmp_path, [1], make_config(metric="accuracy"))


class UnknownReducerMetricTrial(ReducerTrial):
    def evaluation_reducer(self) -> Dict[str, det_torch.Reducer]:
        return {"nope": Reducer.SUM}


def test_reducer_for_an_unknown_metric_is_an_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="nope"):
        run_trial(UnknownReducerMetricTrial, tmp_path, [1], make_config(metric="avg"))


class CallbackTrial(ReducerTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        super().__init__(context)
        self.counter = _trials.CountingCallback()
        CallbackTrial.last_counter = self.counter

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"counter": self.counter}


def test_validation_callbacks_and_initial_validation(tmp_path: pathlib.Path) -> None:
    config = make_config(metric="avg", perform_initial_validation=True, min_validation_period={"batches": 2})
    context = run_trial(CallbackTrial, tmp_path, [4], config)
    assert [v["steps_completed"] for v in context.train.validation_history] == [0, 2, 4]
    counter = CallbackTrial.last_counter
    assert counter.validations_started == 3
    assert counter.validations_ended == [v["metrics"] for v in context.train.validation_history]
