"""Converting searcher lengths to the batches a trial process counts."""
from typing import Any, Mapping

from determined.config import length_to_batches


def to_batches(unit: str, value: int, hparams: Mapping[str, Any], config: Mapping[str, Any]) -> int:
    """`value` `unit`s of the searcher config as batches for a trial with these hyperparameter values."""
    if unit == "batches":
        return int(value)
    return int(length_to_batches({unit: int(value)}, hparams.get("global_batch_size"),
                                 int(config.get("records_per_epoch") or 0)))


def from_batches(unit: str, batches: int, hparams: Mapping[str, Any], config: Mapping[str, Any]) -> float:
    """`batches` a trial trained, in `unit`s of the searcher config (the inverse of `to_batches`)."""
    if unit == "batches":
        return float(batches)
    records = float(batches) * float(hparams.get("global_batch_size") or 1)
    if unit == "records":
        return records
    per_epoch = int(config.get("records_per_epoch") or 0)
    return records / per_epoch if per_epoch > 0 else 0.0
