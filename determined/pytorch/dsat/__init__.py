"""DeepSpeed Autotune (`determined.pytorch.dsat`, Determined 0.23-0.38): find the fastest DeepSpeed config of a
model (ZeRO stage and settings, micro batch size) with short trials that DeepSpeed's engine measures.

`python3 -m determined.pytorch.dsat {binary,random,asha} CONFIG MODEL_DIR [options]` runs the search
(docs/dsat.md); in user code, `get_ds_config_from_hparams` builds the DeepSpeed config of a trial and
`dsat_reporting_context` wraps the engine's calls of a Core API script.
"""
from determined.pytorch.dsat._utils import (
    dsat_reporting_context,
    get_ds_config_from_hparams,
    get_hf_args_with_overwrites,
)
from determined.pytorch.dsat._dsat_search_method import (
    ASHADSATSearchMethod,
    BaseDSATSearchMethod,
    BinarySearchDSATSearchMethod,
    DSATModelProfileInfoTrial,
    DSATTrial,
    DSATTrialTracker,
    RandomDSATSearchMethod,
    _TestDSATSearchMethod,
)
from determined.pytorch.deepspeed._config import overwrite_deepspeed_config

__all__ = [
    "ASHADSATSearchMethod",
    "BaseDSATSearchMethod",
    "BinarySearchDSATSearchMethod",
    "DSATModelProfileInfoTrial",
    "DSATTrial",
    "DSATTrialTracker",
    "RandomDSATSearchMethod",
    "dsat_reporting_context",
    "get_ds_config_from_hparams",
    "get_hf_args_with_overwrites",
    "overwrite_deepspeed_config",
]
