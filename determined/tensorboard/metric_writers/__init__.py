"""MetricWriter (a scalar writer) and BatchMetricWriter (a trial's reported metrics through one)."""
import abc
from typing import Any, Dict, List, Optional, Union

import numpy as np

from determined.tensorboard.metric_writers.util import is_numerical_scalar


class MetricWriter(abc.ABC):
    """Writes scalars to TensorBoard event files; `reset()` flushes what is buffered."""

    @abc.abstractmethod
    def add_scalar(self, name: str, value: Union[int, float, np.number], step: int) -> None:
        """Write the scalar `value` of the tag `name` at `step`."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Flush (and, for writers that need it, start a new file)."""

    def flush(self) -> None:
        """Write everything buffered to disk."""
        self.reset()


class BatchMetricWriter:
    """Writes a trial's training metrics (each batch's, under `Determined/<name>`) and validation metrics
    (`Determined/val_<name>`) through a MetricWriter; values that are not numeric scalars are left out."""

    def __init__(self, writer: MetricWriter) -> None:
        self.writer = writer

    def _write(self, name: str, value: Any, step: int) -> None:
        if is_numerical_scalar(value):
            self.writer.add_scalar("Determined/" + name, value, step)

    def on_train_step_end(
        self, steps_completed: int, metrics: Dict[str, Any], batch_metrics: Optional[List[Dict[str, Any]]] = None
    ) -> None:
        """After a training report at `steps_completed` batches: each batch's metrics at its own batch number,
        and the averaged metrics that no batch carries (those of reducers) at `steps_completed`."""
        seen = set()
        batches = batch_metrics or []
        for index, batch in enumerate(batches):
            for name, value in batch.items():
                self._write(name, value, steps_completed - len(batches) + index)
                seen.add(name)
        for name, value in metrics.items():
            if name not in seen:
                self._write(name, value, steps_completed)
        self.writer.flush()

    def on_validation_step_end(self, steps_completed: int, metrics: Dict[str, Any]) -> None:
        """After a validation at `steps_completed` batches: every metric, named `val_<name>` unless it starts
        with `val`."""
        for name, value in metrics.items():
            self._write(name if name.startswith("val") else "val_" + name, value, steps_completed)
        self.writer.flush()


__all__ = ["BatchMetricWriter", "MetricWriter", "is_numerical_scalar"]
