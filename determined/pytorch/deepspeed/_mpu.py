"""ModelParallelUnit: which ranks of a DeepSpeedTrial hold data-parallel replicas, load data and report metrics."""
import dataclasses
from typing import Any

from determined import core


@dataclasses.dataclass
class ModelParallelUnit:
    """The data-parallel layout of a trial, as the DeepSpeedTrial loop needs it.

    Training data is sharded over `data_parallel_world_size` replicas (this rank's is `data_parallel_rank`); only
    ranks with `should_build_data_loader` build data loaders (the first and last pipeline stages, say), and only
    ranks with `should_report_metrics` contribute training and validation metrics. Give your own to
    ``context.set_mpu()`` for model parallelism beyond DeepSpeed's pipeline engine.
    """

    data_parallel_rank: int
    data_parallel_world_size: int
    should_report_metrics: bool
    should_build_data_loader: bool


def make_data_parallel_mpu(dist_context: core.DistributedContext) -> ModelParallelUnit:
    """Pure data parallelism: every rank is a replica, loads data and reports metrics."""
    return ModelParallelUnit(
        data_parallel_rank=dist_context.get_rank(),
        data_parallel_world_size=dist_context.get_size(),
        should_report_metrics=True,
        should_build_data_loader=True,
    )


def make_deepspeed_mpu(topology: Any) -> ModelParallelUnit:
    """The layout of a DeepSpeed PipelineEngine's grid (`engine.mpu`, a PipelineParallelGrid): data is loaded by the
    first and last pipeline stages of each slice (the first feeds the inputs, the last computes the loss)."""
    stage = topology.get_pipe_parallel_rank()
    last_stage = topology.get_pipe_parallel_world_size() - 1
    return ModelParallelUnit(
        data_parallel_rank=topology.get_data_parallel_rank(),
        data_parallel_world_size=topology.get_data_parallel_world_size(),
        should_report_metrics=True,
        should_build_data_loader=topology.get_slice_parallel_rank() == 0 and stage in (0, last_stage),
    )
