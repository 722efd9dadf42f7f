"""`from determined.tensorboard.metric_writers.pytorch import TorchWriter` (0.12+ code): the writer lives with the
PyTorch code, in determined.pytorch."""
from determined.pytorch._tensorboard import TorchWriter

__all__ = ["TorchWriter"]
