"""Training lengths: ``{records: N}``, ``{batches: N}`` or ``{epochs: N}``, and their conversion to batches."""
from typing import Any, Mapping

from determined.config.errors import Problems, describe
from determined.config.fields import INVALID, Spec, is_int

UNITS = ("records", "batches", "epochs")


class Length(Spec):
    """A length: a mapping with exactly one of records, batches, epochs, whose value is an int (>= 0, or > 0)."""

    def __init__(self, positive: bool = False) -> None:
        self.positive = positive
        bound = "a positive int" if positive else "an int >= 0"
        self.allowed = f"give exactly one of records, batches, epochs, as {bound}, e.g. {{batches: 1000}}"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping) or len(value) != 1 or next(iter(value)) not in UNITS:
            problems.add(path, f"got {describe(value)}", self.allowed)
            return INVALID
        (unit, amount), = value.items()
        if not is_int(amount) or amount < (1 if self.positive else 0):
            bound = "a positive int" if self.positive else "an int >= 0"
            problems.add(f"{path}.{unit}", f"got {describe(amount)}", f"the number of {unit}, {bound}")
            return INVALID
        return {unit: int(amount)}


def length_unit(length: Any) -> str:
    """The unit of a canonical length (``"records"``, ``"batches"`` or ``"epochs"``)."""
    (unit, _), = length.items()
    return str(unit)


def length_value(length: Any) -> int:
    (_, amount), = length.items()
    return int(amount)


def length_to_batches(length: Mapping[str, int], global_batch_size: int, records_per_epoch: int) -> int:
    """Convert a canonical length to batches (integer division, as Determined does).

    records -> records // global_batch_size; epochs -> epochs * records_per_epoch // global_batch_size.
    """
    if not isinstance(length, Mapping) or len(length) != 1 or next(iter(length)) not in UNITS:
        raise ValueError(f"a length must have exactly one of records, batches, epochs; got {describe(length)}")
    unit, amount = length_unit(length), length_value(length)
    if unit == "batches":
        return amount
    if not is_int(global_batch_size) or global_batch_size < 1:
        raise ValueError(f"global_batch_size must be a positive int to convert {unit} to batches; got {global_batch_size!r}")
    if unit == "records":
        return amount // int(global_batch_size)
    if not is_int(records_per_epoch) or records_per_epoch < 1:
        raise ValueError(
            "records_per_epoch must be a positive int to convert epochs to batches; set records_per_epoch in the "
            f"experiment config (got {records_per_epoch!r})"
        )
    return amount * int(records_per_epoch) // int(global_batch_size)
