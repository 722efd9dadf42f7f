"""determined.pytorch: PyTorchTrial, its context, DataLoader and samplers, LRScheduler, reducers, callbacks,
TensorBoard writers, checkpoint loading, the controller, and the Trainer API (`init`, `Trainer`, `Batch`, `Epoch`)."""
from determined.pytorch import _torch_compat, samplers
from determined.pytorch._callback import ClipGradsL2Norm, ClipGradsL2Value, PyTorchCallback
from determined.pytorch._checkpoint import CheckpointLoadContext, load_trial_from_checkpoint_path
from determined.pytorch._context import PyTorchExperimentalContext, PyTorchTrialContext
from determined.pytorch._controller import PyTorchTrialController
from determined.pytorch._data import DataLoader, data_length
from determined.pytorch._lr_scheduler import LRScheduler, LRSchedulerStepMode
from determined.pytorch._metric_reducer import MetricReducer, _SimpleReducer
from determined.pytorch._model_utils import reset_parameters
from determined.pytorch._reducer import Reducer
from determined.pytorch._to_device import to_device
from determined.pytorch._trainer import Batch, Epoch, Trainer, TrainUnit, init
from determined.pytorch._trial import PyTorchTrial, TorchData
from determined.pytorch.samplers import adapt_batch_sampler

PyTorchTrial.trial_controller_class = PyTorchTrialController
_torch_compat.install()  # torch 1.x idioms of Trial code (verbose= of LR schedulers)

__all__ = [
    "PyTorchTrial",
    "PyTorchTrialContext",
    "Trainer",
    "TrainUnit",
    "Batch",
    "Epoch",
    "init",
    "PyTorchExperimentalContext",
    "PyTorchTrialController",
    "PyTorchCallback",
    "ClipGradsL2Norm",
    "ClipGradsL2Value",
    "CheckpointLoadContext",
    "DataLoader",
    "LRScheduler",
    "LRSchedulerStepMode",
    "MetricReducer",
    "Reducer",
    "TorchData",
    "adapt_batch_sampler",
    "data_length",
    "load_trial_from_checkpoint_path",
    "reset_parameters",
    "samplers",
    "to_device",
]
