"""Optimizer stepping: gradient aggregation, averaging, clipping, and what each API generation must return."""
import pathlib
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

from _pytorch_runs import make_config, run_trial
import determined.pytorch as det_torch
from determined import errors

WEIGHTS: List[torch.Tensor] = []
INPUTS = torch.tensor([[1.0], [2.0], [4.0], [8.0], [16.0], [32.0]])


class LinearTrial(det_torch.PyTorchTrial):
    """loss = w * x with SGD(lr=1): the gradient of batch x is x, so the weights tell every step."""

    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1, bias=False))
        with torch.no_grad():
            self.model.weight.zero_()
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=1.0))

    def build_training_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(INPUTS, batch_size=1)

    def build_validation_data_loader(self) -> det_torch.DataLoader:
        return det_torch.DataLoader(INPUTS, batch_size=6)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        loss = self.model(batch).sum()
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer, clip_grads=self._clip())
        WEIGHTS.append(self.model.weight.detach().clone().item())
        return loss

    def _clip(self) -> Any:
        limit = self.context.get_hparams().get("clip")
        if limit is None:
            return None
        return lambda params: torch.nn.utils.clip_grad_value_(params, limit)

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        return {"val_loss": self.model(batch).sum()}


def _weights(tmp_path: pathlib.Path, **config: Any) -> List[float]:
    WEIGHTS.clear()
    hparams = config.pop("hyperparameters", {"global_batch_size": 1})
    run_trial(LinearTrial, tmp_path, [6], make_config(hyperparameters=hparams, **config))
    return list(WEIGHTS)


def test_every_batch_steps(tmp_path: pathlib.Path) -> None:
    assert _weights(tmp_path) == [-1, -3, -7, -15, -31, -63]


def test_aggregation_frequency_averages_gradients(tmp_path: pathlib.Path) -> None:
    assert _weights(tmp_path, optimizations={"aggregation_frequency": 2}) == [0, -1.5, -1.5, -7.5, -7.5, -31.5]


def test_aggregation_frequency_sums_without_averaging(tmp_path: pathlib.Path) -> None:
    weights = _weights(tmp_path, optimizations={"aggregation_frequency": 3, "average_aggregated_gradients": False})
    assert weights == [0, 0, -7, -7, -7, -63]


def test_clip_grads(tmp_path: pathlib.Path) -> None:
    assert _weights(tmp_path, hyperparameters={"global_batch_size": 1, "clip": 2.0}) == [-1, -3, -5, -7, -9, -11]


class OldApiLinearTrial(LinearTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context

    def build_model(self) -> nn.Module:
        model = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            model.weight.zero_()
        return model

    def optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=1.0)

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        clip = self.context.get_hparams().get("clip")
        return {"clip": det_torch.ClipGradsL2Value(clip)} if clip else {}

    def train_batch(self, batch: Any, model: nn.Module, epoch_idx: int, batch_idx: int) -> Any:
        if self.context.get_hparams().get("no_loss"):
            return {"other": 1.0}
        if batch_idx > 0:
            WEIGHTS.append(model.weight.detach().clone().item())
        return {"loss": model(batch).sum(), "x": batch.sum()}

    def evaluate_batch(self, batch: Any, model: nn.Module) -> Dict[str, Any]:
        return {"val_loss": model(batch).sum()}


def test_old_api_determined_runs_backward_step_and_zero_grad(tmp_path: pathlib.Path) -> None:
    WEIGHTS.clear()
    context = run_trial(OldApiLinearTrial, tmp_path, [6], make_config(hyperparameters={"global_batch_size": 1}))
    assert WEIGHTS == [-1, -3, -7, -15, -31]
    assert context.train.training_history[-1]["metrics"] == {"loss": -1302 / 6, "x": 63 / 6}  # w*x before each step


def test_old_api_clip_callback(tmp_path: pathlib.Path) -> None:
    WEIGHTS.clear()
    run_trial(OldApiLinearTrial, tmp_path, [6], make_config(hyperparameters={"global_batch_size": 1, "clip": 2.0}))
    assert WEIGHTS == [-1, -3, -5, -7, -9]


def test_old_api_dict_without_loss_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match='without "loss"'):
        run_trial(OldApiLinearTrial, tmp_path, [1], make_config(hyperparameters={"global_batch_size": 1, "no_loss": 1}))


class NoModelTrial(LinearTrial):
    def __init__(self, context: det_torch.PyTorchTrialContext) -> None:
        self.context = context


def test_new_api_without_wrapped_model_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidTrialError, match="wrap_model"):
        run_trial(NoModelTrial, tmp_path, [1], make_config(hyperparameters={"global_batch_size": 1}))
