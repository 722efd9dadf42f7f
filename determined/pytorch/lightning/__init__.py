"""The PyTorch Lightning adapter of Determined 0.13 to 0.23: a LightningModule trained as a PyTorchTrial.

Needs pytorch-lightning 1.5 to 1.9 (the extra `lightning`: pip install 'determined-revived[lightning]').
"""
try:
    import pytorch_lightning  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "determined.pytorch.lightning needs pytorch-lightning 1.5 to 1.9, which is not installed: "
        "pip install 'determined-revived[lightning]' (or pip install 'pytorch-lightning>=1.5,<2')"
    ) from e

from determined.pytorch.lightning import _pl_shims
from determined.pytorch.lightning._adapter import LightningAdapter

_pl_shims.apply()

__all__ = ["LightningAdapter"]
