"""torch's SummaryWriter on a trial's TensorBoard files: `context.get_tensorboard_writer()` of a PyTorchTrial and
the 0.12 `TorchWriter` (`from determined.tensorboard.metric_writers.pytorch import TorchWriter`).

The writer a trial gets is a real `torch.utils.tensorboard.SummaryWriter` whose default file writer appends to
the trial's one event file (determined/core/_tensorboard.py), the file the platform writes the trial's
metrics into: one growing file per run directory, as TensorBoard needs. (`add_scalars` makes sub-run
directories with files of their own, as torch always does.) torch is imported when a writer is created.
"""
import pathlib
import sys
import types
from typing import Any, Union

import numpy as np

from determined import errors
from determined.core import _tensorboard as events
from determined.tensorboard import get_base_path
from determined.tensorboard.metric_writers import MetricWriter

INSTALL_HINT = "pip install 'determined-revived[tensorboard]' (or pip install tensorboard)"


def _torch_tensorboard() -> Any:
    if "tensorflow" not in sys.modules:
        # torch.utils.tensorboard resolves tensorboard's compat `tf` when imported, which imports all of TensorFlow
        # when it is installed (seconds, and memory, for a PyTorch trial); this marker module makes TensorBoard
        # use its own stub, which serves torch's writer (event files, local and S3 paths).
        sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    try:
        from torch.utils import tensorboard
    except ImportError as e:
        raise errors.DeterminedError(
            f"a TensorBoard writer needs the tensorboard package, which torch.utils.tensorboard cannot import ({e}); "
            f"install it: {INSTALL_HINT}"
        ) from None
    return tensorboard


class _SharedEventWriter:
    """What torch's FileWriter writes through (its `event_writer`): the trial's shared event file."""

    def __init__(self, files: events.TrialMetricsWriter, log_dir: pathlib.Path) -> None:
        self._files = files
        self._log_dir = str(log_dir)

    def get_logdir(self) -> str:
        return self._log_dir

    def add_event(self, event: Any) -> None:
        self._files.write_event(event.SerializeToString())

    def flush(self) -> None:
        """Every event is on disk when add_event returns."""

    def close(self) -> None:
        """The file stays open for the platform's metrics and other writers."""

    def reopen(self) -> None:
        """Nothing to reopen."""


def trial_summary_writer(files: events.TrialMetricsWriter) -> Any:
    """A torch SummaryWriter on the trial's TensorBoard directory, appending to its shared event file."""
    tensorboard = _torch_tensorboard()
    from torch.utils.tensorboard.writer import FileWriter

    class _SharedFileWriter(FileWriter):
        def __init__(self, log_dir: pathlib.Path) -> None:  # no FileWriter.__init__: it would open a file
            self.event_writer = _SharedEventWriter(files, log_dir)

    class TrialSummaryWriter(tensorboard.SummaryWriter):
        def _get_file_writer(self) -> Any:
            if self.all_writers is None or self.file_writer is None:
                self.file_writer = _SharedFileWriter(pathlib.Path(self.log_dir))
                self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            return self.file_writer

    return TrialSummaryWriter(log_dir=str(files.directory()))


def summary_writer_at_base_path() -> Any:
    """The trial's SummaryWriter inside a trial (see trial_summary_writer), else a plain one at get_base_path()."""
    current = events.current()
    if current is not None:
        return trial_summary_writer(current)
    return _torch_tensorboard().SummaryWriter(log_dir=str(get_base_path({})))


class TorchWriter(MetricWriter):
    """A torch SummaryWriter on the trial's TensorBoard files (`writer`), as 0.12-0.26 code creates it:

    .. code-block:: python

        from determined.tensorboard.metric_writers.pytorch import TorchWriter

        class MyTrial(PyTorchTrial):
            def __init__(self, context):
                self.logger = TorchWriter()

            def train_batch(self, batch, epoch_idx, batch_idx):
                self.logger.writer.add_scalar("my_metric", value, batch_idx)

    The scalars appear with the trial's metrics in `det tensorboard start`. New code can use
    `context.get_tensorboard_writer()`, the same writer.
    """

    def __init__(self) -> None:
        self.writer: Any = summary_writer_at_base_path()

    def add_scalar(self, name: str, value: Union[int, float, np.number], step: int) -> None:
        self.writer.add_scalar(name, value, step)

    def reset(self) -> None:
        self.writer.flush()

    def flush(self) -> None:
        self.writer.flush()
