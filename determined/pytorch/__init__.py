"""determined.pytorch: PyTorchTrial, its context, DataLoader, LRScheduler, Reducer, callbacks and controller."""
from determined.pytorch._callback import ClipGradsL2Norm, ClipGradsL2Value, PyTorchCallback
from determined.pytorch._checkpoint import load_trial_from_checkpoint_path
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._controller import PyTorchTrialController
from determined.pytorch._data import DataLoader
from determined.pytorch._lr_scheduler import LRScheduler, LRSchedulerStepMode
from determined.pytorch._reducer import Reducer
from determined.pytorch._to_device import to_device
from determined.pytorch._trial import PyTorchTrial, TorchData

PyTorchTrial.trial_controller_class = PyTorchTrialController

__all__ = [
    "PyTorchTrial",
    "PyTorchTrialContext",
    "PyTorchTrialController",
    "PyTorchCallback",
    "ClipGradsL2Norm",
    "ClipGradsL2Value",
    "DataLoader",
    "LRScheduler",
    "LRSchedulerStepMode",
    "Reducer",
    "TorchData",
    "load_trial_from_checkpoint_path",
    "to_device",
]
