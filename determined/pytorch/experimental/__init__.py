"""determined.pytorch.experimental: Determined 0.38's batch inference API.

Subclass `TorchBatchProcessor` and hand it to `torch_batch_process(cls, dataset, ...)` in the script of a trial:
the dataset is split over the trial's ranks, each rank's processor gets its batches, and the position is
checkpointed so that a paused, preempted or restarted trial goes on where it stopped (docs/batch_inference.md).
"""
from determined.pytorch.experimental._batch_context import TorchBatchProcessorContext, get_default_device
from determined.pytorch.experimental._batch_processor import TorchBatchProcessor
from determined.pytorch.experimental._torch_batch_process import torch_batch_process

__all__ = ["TorchBatchProcessor", "TorchBatchProcessorContext", "get_default_device", "torch_batch_process"]
