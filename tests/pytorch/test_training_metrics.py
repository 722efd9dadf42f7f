"""The per-batch training metrics the controller keeps until a report, and what a report makes of them."""
import math

import pytest
import torch

from determined import errors
from determined.pytorch._training_metrics import TrainingMetrics


def _loss(value: float) -> torch.Tensor:
    weight = torch.tensor(value, requires_grad=True)
    return weight * 1.0  # a loss as train_batch returns it: part of an autograd graph


def test_cpu_float_scalars_are_kept_as_their_python_values_without_their_graph() -> None:
    metrics = TrainingMetrics()
    for value in (0.1, 0.25, float("nan")):
        metrics.add({"loss": _loss(value)})
    kept = [batch["loss"] for batch in metrics._batches]
    assert all(type(v) is float for v in kept)  # no tensor, and so no autograd graph, held per batch
    averages, per_batch = metrics.flush()
    # The float32 value each batch had, exactly (as the one stacked copy to the host gave before).
    assert per_batch[0]["loss"] == float(torch.tensor(0.1)) and per_batch[1]["loss"] == 0.25
    assert math.isnan(per_batch[2]["loss"]) and math.isnan(averages["loss"])
    assert len(metrics) == 0


def test_other_tensors_are_detached_and_converted_at_the_report() -> None:
    metrics = TrainingMetrics()
    for step in range(3):
        metrics.add({
            "loss": _loss(step / 4).reshape(1),  # one element, one dimension
            "half": torch.tensor(step + 0.5, dtype=torch.float16),
            "count": torch.tensor(step),  # an integer tensor
            "flag": torch.tensor(step % 2 == 0),  # a bool tensor
            "plain": step * 2,
        })
    first = metrics._batches[0]
    assert isinstance(first["loss"], torch.Tensor) and not first["loss"].requires_grad
    assert type(first["half"]) is float and first["half"] == 0.5
    assert isinstance(first["count"], torch.Tensor) and isinstance(first["flag"], torch.Tensor)
    averages, per_batch = metrics.flush()
    assert [b["loss"] for b in per_batch] == [0.0, 0.25, 0.5]
    assert [b["count"] for b in per_batch] == [0.0, 1.0, 2.0]
    assert [b["flag"] for b in per_batch] == [1.0, 0.0, 1.0]
    assert averages == {"loss": 0.25, "half": 1.5, "count": 1.0, "flag": pytest.approx(2 / 3), "plain": 2.0}


def test_batches_with_different_metrics_keep_each_batch_s_own() -> None:
    metrics = TrainingMetrics()
    metrics.add({"loss": _loss(1.0)})
    metrics.add({"loss": _loss(3.0), "accuracy": torch.tensor(0.5)})
    averages, per_batch = metrics.flush()
    assert per_batch == [{"loss": 1.0}, {"loss": 3.0, "accuracy": 0.5}]
    assert averages == {"loss": 2.0, "accuracy": 0.5}


def test_a_metric_that_is_not_a_number_is_refused_at_the_report() -> None:
    metrics = TrainingMetrics()
    metrics.add({"loss": _loss(1.0), "note": "text"})
    with pytest.raises(errors.InvalidTrialError, match="'note'"):
        metrics.flush()
