"""Lengths in records or epochs that come to less than one batch: known at submit, so refused there.

For a Trial class the master converts a length in records or epochs to batches with the trial's
`global_batch_size` (integer division, as Determined does: `lengths.length_to_batches`). A length that comes to
0 batches trains nothing (`searcher.max_length`, `budget`, `length_per_round`) or never validates or checkpoints
by period (`min_validation_period`, `min_checkpoint_period`: 0 means off), though the user asked for some.
A script gets its lengths in their own unit, so nothing is converted for it and nothing is checked here.
"""
from typing import Any, Dict, List, Mapping

from determined.config.errors import Problems
from determined.config.fields import INVALID
from determined.config.lengths import length_unit, length_value
from determined.config.searchers import searcher_lengths


def largest_batch_size(hparams: Mapping[str, Any]) -> Any:
    """The largest `global_batch_size` a trial may get (int, or None when it is not a usable constant, int range or
    list of ints: its own check reports that)."""
    spec = hparams.get("global_batch_size")
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("type")
    values: List[Any] = {"const": [spec.get("val")], "int": [spec.get("maxval")],
                         "categorical": list(spec.get("vals") or [])}.get(kind, [])
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 1]
    return max(ints) if ints and len(ints) == len(values) else None


def check_lengths_reach_a_batch(config: Dict[str, Any], problems: Problems) -> None:
    hparams = config.get("hyperparameters")
    if not isinstance(hparams, Mapping):
        return
    batch = largest_batch_size(hparams)
    if batch is None:
        return
    lengths = {name: config.get(name) for name in ("min_validation_period", "min_checkpoint_period")}
    if isinstance(config.get("searcher"), Mapping):
        lengths.update({f"searcher.{k}": v for k, v in searcher_lengths(config["searcher"]).items()})
    per_epoch = config.get("records_per_epoch")
    for name, length in lengths.items():
        if not isinstance(length, Mapping) or length is INVALID or len(length) != 1:
            continue
        unit, amount = length_unit(length), length_value(length)
        if unit == "batches" or amount == 0:
            continue
        if unit == "records":
            records, said = amount, f"{amount} records"
        elif isinstance(per_epoch, int) and per_epoch > 0:
            records, said = amount * per_epoch, f"{amount} epoch(s) of records_per_epoch {per_epoch} = {amount * per_epoch} records"
        else:
            continue  # epochs without records_per_epoch: reported by its own check
        if records < batch:
            effect = {"min_validation_period": "a trial would never validate by period (0 batches is off)",
                      "min_checkpoint_period": "a trial would never checkpoint by period (0 batches is off)",
                      }.get(name, "a trial would train 0 batches")
            fix = (f"give at least {batch} records" if unit == "records" else
                   f"give enough epochs for {batch} records, or check records_per_epoch")
            problems.add(name, f"{said} is less than one batch of global_batch_size {batch}: {effect}",
                         f"{fix} (or a length in batches, e.g. {{batches: 100}})")
