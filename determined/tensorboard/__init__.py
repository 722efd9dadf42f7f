"""determined.tensorboard: the TensorBoard names of Determined 0.12-0.38, over this platform's trial event files.

A trial's TensorBoard files live where `det tensorboard start` serves them (see determined/core/_tensorboard.py).
`get_base_path()` is that directory for the trial this process runs; `MetricWriter` is the interface of a scalar
writer, `BatchMetricWriter` writes a trial's reported metrics through one, and
`metric_writers.pytorch.TorchWriter` is the torch SummaryWriter of 0.12/0.13 code.
"""
import os
import pathlib
import tempfile
from typing import Any, Dict, Optional

from determined.core import _tensorboard
from determined.tensorboard.metric_writers import BatchMetricWriter, MetricWriter


def get_base_path(checkpoint_config: Optional[Dict[str, Any]] = None, manager: bool = False) -> pathlib.Path:
    """The directory for the TensorBoard event files of the trial this process runs.

    Inside a trial it is the trial's directory that `det tensorboard start` serves (on the chief, when the
    master's data dir is on this machine; a local temporary directory otherwise). `checkpoint_config`'s
    `base_path`, when given, overrides it, as in Determined; outside a trial the default is
    `<temp dir>/tensorboard`. `manager` is accepted for 0.12 code and has no effect.
    """
    config = checkpoint_config or {}
    if config.get("base_path"):
        allocation = os.environ.get("DET_ALLOCATION_ID", "")
        rank = os.environ.get("RANK", "0")
        return pathlib.Path(config["base_path"]) / f"tensorboard-{allocation}-{rank}"
    current = _tensorboard.current()
    if current is not None:
        return current.directory()
    return pathlib.Path(tempfile.gettempdir()) / "tensorboard"


def get_metric_writer() -> BatchMetricWriter:
    """A BatchMetricWriter over the TensorBoard writer of the installed framework (PyTorch's TorchWriter)."""
    from determined.tensorboard.metric_writers.pytorch import TorchWriter

    return BatchMetricWriter(TorchWriter())


__all__ = ["BatchMetricWriter", "MetricWriter", "get_base_path", "get_metric_writer"]
