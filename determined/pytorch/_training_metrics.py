"""Training metrics: kept as (detached) tensors per batch and converted once per report."""
import math
from typing import Any, Dict, List, Tuple

import numpy as np
import torch

from determined import errors


def metrics_of_train_batch(output: Any, trial_name: str) -> Dict[str, Any]:
    """The metrics dict of what train_batch returned: a loss tensor, or a dict with "loss" (and others)."""
    if isinstance(output, torch.Tensor):
        return {"loss": output}
    if isinstance(output, dict):
        return output
    raise errors.InvalidTrialError(
        f"{trial_name}.train_batch() returned {type(output).__name__}; return the loss tensor, or a dict of "
        "metrics with the loss under \"loss\""
    )


class TrainingMetrics:
    """The per-batch training metrics since the last report."""

    def __init__(self) -> None:
        self._batches: List[Dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._batches)

    def add(self, metrics: Dict[str, Any]) -> None:
        self._batches.append({name: _kept(value) for name, value in metrics.items()})

    def flush(self) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
        """(averages over the batches, per-batch values) as Python numbers; empties the buffer."""
        batches, self._batches = self._batches, []
        if batches and all(m.keys() == batches[0].keys() for m in batches):  # every batch the same metrics
            names = list(batches[0])
            same = {name: _to_python_values(name, [m[name] for m in batches]) for name in names}
            rows = [dict(zip(names, values)) for values in zip(*(same[name] for name in names))]
            return {name: _average(values) for name, values in same.items()}, rows
        names: List[str] = []
        for metrics in batches:
            names.extend(name for name in metrics if name not in names)
        columns: Dict[str, List[Any]] = {}
        for name in names:
            present = [m[name] for m in batches if name in m]
            columns[name] = _to_python_values(name, present)
        per_batch: List[Dict[str, Any]] = [{} for _ in batches]
        cursor = {name: 0 for name in names}
        for index, metrics in enumerate(batches):
            for name in metrics:
                per_batch[index][name] = columns[name][cursor[name]]
                cursor[name] += 1
        averages = {name: _average(values) for name, values in columns.items()}
        return averages, per_batch


def _kept(value: Any) -> Any:
    """What a batch's metric is kept as until the report: a CPU float scalar as the Python float it is (reading it
    costs no device sync, and holding a tensor per batch alive costs the next batches' allocations more than the
    read), another tensor detached (no autograd graph kept alive, no device sync), anything else as it is."""
    if isinstance(value, torch.Tensor):
        if value.is_cpu and value.dim() == 0 and value.is_floating_point():
            return value.item()
        return value.detach()
    return value


def _to_python_values(name: str, values: List[Any]) -> List[Any]:
    if all(type(v) is float for v in values):  # CPU scalars, kept as floats (see _kept)
        return values
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if len(tensors) == len(values) and all(t.numel() == 1 for t in tensors):
        # One copy to the host for all batches of the report.
        first = tensors[0] if tensors else None
        if first is not None and all(t.dim() == 0 and t.dtype == first.dtype and t.device == first.device
                                     for t in tensors):
            return torch.stack(tensors).to(torch.float64).cpu().tolist()  # scalars of one kind: one stack
        return torch.stack([t.reshape(()).to(torch.float64) for t in tensors]).cpu().tolist()
    out = []
    for value in values:
        if isinstance(value, torch.Tensor):
            value = value.cpu().numpy()
        if isinstance(value, np.ndarray):
            value = value.item() if value.size == 1 else value.tolist()
        elif isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (int, float, list)) or isinstance(value, bool):
            raise errors.InvalidTrialError(
                f"training metric {name!r} has value {value!r} of type {type(value).__name__}; "
                "train_batch() must return numbers (python, numpy or torch scalars)"
            )
        out.append(value)
    return out


def _average(values: List[Any]) -> Any:
    if all(isinstance(v, (int, float)) for v in values):
        numbers = [float(v) for v in values]
        return sum(numbers) / len(numbers) if numbers else math.nan
    return np.mean(np.asarray(values, dtype=np.float64), axis=0).tolist()
