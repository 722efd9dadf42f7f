"""TensorBoard event files of a trial's metrics, written without TensorFlow, PyTorch or the tensorboard package.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, data, masked CRC-32C of the
data), each holding an `Event` protocol buffer; scalars are `Summary.Value.simple_value`. The few fields used
are encoded here by hand. Each trial writes under `<master data dir>/tensorboard/experiment_<E>/trial_<T>/`
(see `trial_dir`), where `det tensorboard start E` finds them; a trial whose master's data dir is not on its
machine writes nothing there, and `det tensorboard start` writes that trial's files from the master's metrics.
The trial's own TensorBoard writers (determined/tensorboard/metric_writers/pytorch.py) append their serialized
events to the same file (`TrialMetricsWriter.write_event`).
"""
import logging
import os
import pathlib
import tempfile
from typing import Any, Dict, Mapping, Optional

from determined.common.tfevents import (  # noqa: F401 (the names trial code and tests import from here)
    EventFileWriter,
    TENSORBOARD_DIR,
    encode_event,
    encode_record,
    experiment_dir,
    has_event_files,
    is_scalar,
    trial_dir,
    write_metrics,
)

logger = logging.getLogger("determined.core")


class TrialMetricsWriter:
    """The TensorBoard files of the trial this process runs.

    On the chief of a trial whose master's data dir is on this machine, they go to the trial's directory there
    (`trial_dir`), where `det tensorboard start` serves them; elsewhere (another machine, another rank, no master)
    to a local temporary directory nobody serves. The platform's own metrics (`write`) are written only to the
    served directory, and can be turned off (`enabled`); writers of the trial's code (a torch SummaryWriter from
    `context.get_tensorboard_writer()`) share the same event file through `event_file()`, because TensorBoard
    reads the files of one run directory one after the other, never two growing side by side. A failing write
    disables the files with one log line, so that training never stops for TensorBoard.
    """

    def __init__(self, session: Any, trial_id: int, experiment_id: Optional[int] = None, rank: int = 0,
                 master_data_dir: Optional[str] = None) -> None:
        self._session = session
        self._master_data_dir = master_data_dir  # when known (the run's context says it): no need to ask the master
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self._rank = rank
        self._writer: Optional[EventFileWriter] = None
        self._directory: Optional[pathlib.Path] = None
        self._served = False
        self._disabled = False
        # Whether the platform writes the trial's training and validation metrics (set_enable_tensorboard_logging).
        self.enabled = True

    def _served_directory(self) -> Optional[pathlib.Path]:
        if self._session is None or self._rank != 0:
            return None
        data_dir = self._master_data_dir
        if not data_dir:
            info: Dict[str, Any] = self._session.get("/master/info") or {}
            data_dir = info.get("data_dir")
        if not data_dir or not pathlib.Path(data_dir).is_dir():
            logger.info("TensorBoard: the master's data dir is not on this machine; `det tensorboard start` "
                        "writes trial %s's event files from the master's metrics", self._trial_id)
            return None
        experiment_id = self._experiment_id
        if experiment_id is None:
            experiment_id = int(os.environ.get("DET_EXPERIMENT_ID") or
                                self._session.get(f"/trials/{self._trial_id}/context")["experiment_id"])
        return trial_dir(pathlib.Path(data_dir) / TENSORBOARD_DIR, experiment_id, self._trial_id)

    def directory(self) -> pathlib.Path:
        """The directory of this process's event files (see the class)."""
        if self._directory is None:
            served: Optional[pathlib.Path] = None
            try:
                served = self._served_directory()
            except Exception as e:  # TensorBoard files are a convenience: never fail the trial for them
                logger.warning("TensorBoard: cannot find trial %s's TensorBoard directory: %s", self._trial_id, e)
            self._served = served is not None
            if served is None:
                served = pathlib.Path(tempfile.mkdtemp(prefix=f"det-tensorboard-trial{self._trial_id}-rank{self._rank}-"))
            self._directory = served
        return self._directory

    @property
    def served(self) -> bool:
        """Whether `directory()` is the one `det tensorboard start` serves."""
        self.directory()
        return self._served

    def event_file(self) -> Optional[EventFileWriter]:
        """The event file every writer of this process shares (opened on first use); None once disabled."""
        if self._writer is None and not self._disabled:
            try:
                self._writer = EventFileWriter(self.directory())
            except Exception as e:
                logger.warning("TensorBoard: event files of trial %s are off: %s", self._trial_id, e)
                self._disabled = True
        return self._writer

    def write_event(self, event: bytes) -> None:
        """Append one serialized `Event` (from a writer of the trial's code) to the shared event file."""
        writer = self.event_file()
        if writer is None:
            return
        try:
            writer.write_event(event)
        except Exception as e:
            self._fail(writer, e)

    def write(self, group: str, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """The platform's metrics of one report, when `enabled` and the files are served."""
        if not self.enabled or not self.served:
            return
        writer = self.event_file()
        if writer is None:
            return
        try:
            write_metrics(writer, group, steps_completed, metrics)
        except Exception as e:
            self._fail(writer, e)

    def _fail(self, writer: EventFileWriter, e: Exception) -> None:
        logger.warning("TensorBoard: could not write trial %s's event file %s: %s", self._trial_id, writer.path, e)
        self._disabled = True
        self._writer = None


# The TensorBoard files of the trial this process runs (the last core context made), for the APIs that find them
# without a context: `determined.tensorboard.get_base_path()`.
_current: Optional[TrialMetricsWriter] = None


def set_current(writer: TrialMetricsWriter) -> None:
    """Make `writer` the files of the trial this process runs; a context without a master (one that only loads a
    checkpoint, say) never replaces the files of a trial that has one."""
    global _current
    if _current is not None and _current._session is not None and writer._session is None:
        return
    _current = writer


def current() -> Optional[TrialMetricsWriter]:
    """The TensorBoard files of the trial this process runs, or None outside a trial."""
    return _current
