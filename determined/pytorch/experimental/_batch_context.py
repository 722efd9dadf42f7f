"""What a `TorchBatchProcessor` is given: the device, the model preparation, outputs storage, metrics."""
import contextlib
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Type, Union

import torch
from torch import nn

from determined import core
from determined.pytorch._metric_reducer import MetricReducer, ReducerRegistry
from determined.pytorch._to_device import to_device


def get_default_device(core_context: core.Context) -> torch.device:
    """The device of this rank: `cuda:<local rank>` when the machine has GPUs, else the CPU (Determined 0.38)."""
    if torch.cuda.device_count() == 0:
        return torch.device("cpu")
    return torch.device("cuda", core_context.distributed.local_rank)


class TorchBatchProcessorContext:
    """The context `torch_batch_process` gives each rank's processor (`TorchBatchProcessor.__init__(context)`).

    `device` is this rank's device. Outputs written through `upload_path()` land in the experiment's checkpoint
    storage under `<output uuid>/rank_<rank>/`, the same uuid for every rank and across restarts of the trial.
    """

    def __init__(self, core_context: core.Context, output_uuid: str) -> None:
        self._core_context = core_context
        self._output_uuid = output_uuid
        self.device = get_default_device(core_context)
        self._reducers = ReducerRegistry()
        self._use_default_storage = False

    # -- the trial -------------------------------------------------------------------------------------

    def get_hparams(self) -> Dict[str, Any]:
        """The trial's hyperparameters."""
        return dict(self._core_context.info.trial.hparams)

    def get_distributed_rank(self) -> int:
        """The rank of this process in the trial."""
        return self._core_context.distributed.get_rank()

    def get_distributed_size(self) -> int:
        """The number of processes (slots) the trial runs on."""
        return self._core_context.distributed.get_size()

    # -- the model and the data ------------------------------------------------------------------------

    def to_device(self, data: Any, warned_types: Optional[Set[Type]] = None) -> Any:
        """`data` (tensors, numpy arrays, and lists, tuples and dicts of them) moved to `device`; other values are
        returned as they are. `warned_types` is accepted for Determined 0.38's signature."""
        return to_device(data, self.device)

    def prepare_model_for_inference(self, model: nn.Module) -> nn.Module:
        """Put `model` in eval mode on `device` and return it."""
        model.eval()
        model.to(self.device)
        return model

    # -- outputs and metrics ---------------------------------------------------------------------------

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory for TensorBoard files (a profiler's trace handler, say) shown with the trial."""
        return self._core_context.train.get_tensorboard_path()

    @contextlib.contextmanager
    def upload_path(self) -> Iterator[pathlib.Path]:
        """A local directory to write output files into; on exit they are added to the checkpoint storage under
        `<output uuid>/rank_<rank>/` (files of the same name are replaced). Use it as
        `with context.upload_path() as path:`."""
        self._use_default_storage = True
        storage = self._core_context.checkpoint.storage_manager
        root = pathlib.Path(tempfile.mkdtemp(prefix="det-batch-output-"))
        try:
            path = root / f"rank_{self.get_distributed_rank()}"
            path.mkdir()
            yield path
            storage.add_files(str(root), self._output_uuid)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def get_default_storage_path(self) -> str:
        """Where `upload_path()` stores this rank's files: its storage location, described for a person."""
        return f"{_describe_storage(self._core_context)}/{self._output_uuid}/rank_{self.get_distributed_rank()}"

    def report_metrics(self, group: str, steps_completed: int, metrics: Dict[str, Any]) -> None:
        """Report metrics of any group (not `.` in its name) at `steps_completed`; only the chief's (rank 0) reach
        the master, as with `core_context.train.report_metrics`."""
        self._core_context.train.report_metrics(group=group, steps_completed=steps_completed, metrics=metrics)

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Record that this inference used `model_version` (an SDK `ModelVersion`): the metrics the trial reports
        are then read by `model_version.get_metrics()` (and its checkpoint's `get_metrics()`). Chief only."""
        self._core_context.experimental.report_task_using_model_version(model_version)

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Record that this inference used `checkpoint` (an SDK `Checkpoint`): the metrics the trial reports are
        then read by `checkpoint.get_metrics()`. Chief only."""
        self._core_context.experimental.report_task_using_checkpoint(checkpoint)

    def wrap_reducer(
        self,
        reducer: Union[Callable[[List[Any]], Any], MetricReducer],
        name: Optional[str] = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """A metric computed over every rank's values: a function of the list of all values passed to the returned
        object's `update(value)`, or a `det.pytorch.MetricReducer`. Every reducer is reduced across the ranks when
        the run ends (or stops for a preemption) and reported as validation metrics (under `name`, or the dict it
        returns with name=None). `for_training`/`for_validation` are accepted for Determined 0.38's signature."""
        return self._reducers.wrap(reducer, name, for_training=False, for_validation=True)

    def _reduce_and_report(self, steps_completed: int) -> None:
        """Every rank calls it at once: reduce the wrapped reducers and report them (chief)."""
        if not len(self._reducers):
            return
        metrics = self._reducers.reduce(False, self._core_context.distributed.allgather)
        self._core_context.train.report_validation_metrics(steps_completed=steps_completed, metrics=metrics)


def _describe_storage(core_context: core.Context) -> str:
    storage = core_context.checkpoint.storage_manager
    base = getattr(storage, "base_path", None)
    if base is not None:
        return str(base)
    bucket = getattr(storage, "bucket", None)
    if bucket is not None:
        prefix = getattr(storage, "prefix", "") or ""
        return f"s3://{bucket}" + (f"/{prefix}" if prefix else "")
    return repr(storage)
