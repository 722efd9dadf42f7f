"""What Lightning 1.5/1.6 had and the installable 1.9 removed, for the code written against them (Determined 0.17 to
0.23's examples): applied once when determined.pytorch.lightning is imported, only where missing."""
from typing import Any, Optional

import pytorch_lightning as pl


def _size(self: pl.LightningDataModule, dim: Optional[int] = None) -> Any:
    """`LightningDataModule.size()` (removed in Lightning 1.7): the `dims` the module set, or one of them."""
    dims = getattr(self, "dims", None) or ()
    return dims[dim] if dim is not None else dims


def apply() -> None:
    if not hasattr(pl.LightningDataModule, "size"):
        pl.LightningDataModule.size = _size  # type: ignore[attr-defined]
