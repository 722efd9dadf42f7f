"""determined.pytorch.deepspeed: DeepSpeedTrial (Determined 0.19-0.38), its context and controller, the
ModelParallelUnit, the DeepSpeed config helpers, and 0.38's DeepSpeed Trainer API (`init`, `Trainer`). Needs the deepspeed package (the `deepspeed` extra)."""
import importlib.util

if importlib.util.find_spec("deepspeed") is None:
    raise ImportError(
        "determined.pytorch.deepspeed needs the deepspeed package, which is not installed: "
        "pip install 'determined-revived[deepspeed]' (DeepSpeed 0.19.8; on CPU slots it trains with its CPU "
        "accelerator and compiles a small op with the system's C++ compiler on first use)"
    )

from determined.pytorch.deepspeed._config import get_ds_config_from_hparams, overwrite_deepspeed_config
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._mpu import ModelParallelUnit, make_data_parallel_mpu, make_deepspeed_mpu
from determined.pytorch.deepspeed._trial import DeepSpeedTrial
from determined.pytorch.deepspeed._trainer import Trainer, init
from determined.pytorch.deepspeed import _shims

_shims.accept_config_beside_args()  # DeepSpeed 0.8's initialize(args=hparams, config=dict) of 0.19-0.26 code
_shims.let_backward_pass_through_other_engines()  # DeepSpeed 0.8's backward through another engine (GANs)

__all__ = [
    "DeepSpeedTrial",
    "DeepSpeedTrialContext",
    "DeepSpeedTrialController",
    "ModelParallelUnit",
    "Trainer",
    "get_ds_config_from_hparams",
    "init",
    "make_data_parallel_mpu",
    "make_deepspeed_mpu",
    "overwrite_deepspeed_config",
]
