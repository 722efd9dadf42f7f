"""determined.pytorch.dsat (Determined 0.26+): `get_ds_config_from_hparams`, the DeepSpeed config of a trial. The
DeepSpeed Autotune searcher of that package (a custom search method) is not here."""
from determined.pytorch.deepspeed._config import get_ds_config_from_hparams

__all__ = ["get_ds_config_from_hparams"]
