"""The DeepSpeed Trainer API of Determined 0.38: `det.pytorch.deepspeed.init()` and `Trainer(trial, context).fit()`.

The PyTorch Trainer API (`determined.pytorch._trainer`) with DeepSpeed's pieces: `init()` builds a
DeepSpeedTrialContext (and DeepSpeed's process group), and `fit()` runs the DeepSpeedTrial with the
DeepSpeedTrial controller, given the Trainer's periods, length and checkpoint files. One loop: the same
controller drives a DeepSpeedTrial of a `module:Class` entrypoint.
"""
import contextlib
from typing import Any, Dict, Iterator, Optional

from determined import core
from determined.pytorch._trainer import FitControllerMixin, TrainerContextMixin, trainer_context
from determined.pytorch._trainer import Trainer as _PyTorchTrainer
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._trial import DeepSpeedTrial


class _DeepSpeedTrainerContext(TrainerContextMixin, DeepSpeedTrialContext):
    """The DeepSpeedTrialContext of `init()`."""

    _init_name = "det.pytorch.deepspeed.init()"


class _DeepSpeedFitController(FitControllerMixin, DeepSpeedTrialController):
    """The DeepSpeedTrial controller as `fit()` runs it."""


@contextlib.contextmanager
def init(
    *,
    hparams: Optional[Dict[str, Any]] = None,
    exp_conf: Optional[Dict[str, Any]] = None,
    distributed: Optional[core.DistributedContext] = None,
    enable_tensorboard_logging: bool = True,
) -> Iterator[DeepSpeedTrialContext]:
    """The DeepSpeedTrialContext of a Trainer API script, as a context manager:
    ``with det.pytorch.deepspeed.init() as context:``.

    As ``det.pytorch.init()`` (docs/trainer.md): on the platform the config and seed are the trial's and the ranks
    are the launcher's (``python3 -m determined.launch.deepspeed python3 train.py``; hparams are NOT filled in:
    pass ``det.get_cluster_info().trial.hparams``); off the platform the arguments are used as given, metrics go
    to the log and checkpoints to ``checkpoints/`` in the data directory. Either way DeepSpeed's process group is
    ready on return (gloo on CPU slots, nccl on GPUs; one rank too), unless DET_MANUAL_INIT_DISTRIBUTED is set.
    """
    with trainer_context(_DeepSpeedTrainerContext, DeepSpeedTrialController, "determined.launch.deepspeed",
                         hparams, exp_conf, distributed, enable_tensorboard_logging) as context:
        yield context


class Trainer(_PyTorchTrainer):
    """Trains a DeepSpeedTrial built with the context of `det.pytorch.deepspeed.init()`:
    ``Trainer(trial, context).fit(...)``, with the arguments of ``det.pytorch.Trainer.fit`` (docs/trainer.md).
    One batch is one optimizer step of the first engine (``gradient_accumulation_steps`` micro batches per slot;
    docs/deepspeed.md)."""

    _controller_class = _DeepSpeedFitController

    def __init__(self, trial: DeepSpeedTrial, context: DeepSpeedTrialContext) -> None:
        super().__init__(trial, context)

    @staticmethod
    def _check_arguments(trial: Any, context: Any) -> None:
        if not isinstance(trial, DeepSpeedTrial):
            raise TypeError(f"det.pytorch.deepspeed.Trainer(trial, context): trial must be a DeepSpeedTrial, got "
                            f"{type(trial).__name__} (a PyTorchTrial trains with det.pytorch.Trainer)")
        if not isinstance(context, DeepSpeedTrialContext):
            raise TypeError("det.pytorch.deepspeed.Trainer(trial, context): context must be the DeepSpeedTrialContext "
                            f"of det.pytorch.deepspeed.init(), got {type(context).__name__}")
