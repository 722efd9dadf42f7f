"""`torch_batch_process`: run a `TorchBatchProcessor` over a dataset, sharded over a trial's ranks, resumable."""
import logging
import math
import os
import sys
import uuid
from typing import Any, Dict, Optional, Sized, Type

from torch.utils import data

from determined import LOG_FORMAT, core, errors
from determined.pytorch import _distributed
from determined.pytorch._data import DataLoader
from determined.pytorch.experimental._batch_context import (
    TorchBatchProcessorContext,
    _describe_storage,
    get_default_device,
)
from determined.pytorch.experimental._batch_processor import TorchBatchProcessor

logger = logging.getLogger("determined.pytorch")

DEFAULT_BATCH_SIZE = 1
# What a position checkpoint's metadata holds: the batches every rank completed, and the outputs' uuid.
STEPS_KEY = "steps_completed"
OUTPUT_KEY = "default_output_uuid"


def torch_batch_process(
    batch_processor_cls: Type[TorchBatchProcessor],
    dataset: data.Dataset,
    batch_size: Optional[int] = None,
    max_batches: Optional[int] = None,
    checkpoint_interval: int = 5,
    dataloader_kwargs: Optional[Dict[str, Any]] = None,
    distributed_context: Optional[core.DistributedContext] = None,
) -> None:
    """Process `dataset` with `batch_processor_cls` on every rank of the trial (Determined 0.38).

    Rank r of N gets the batches r, r+N, r+2N, ... (in order: no shuffling). Every `checkpoint_interval` batches
    (per rank) every rank calls `on_checkpoint_start()`, the chief checkpoints the position (the batches all ranks
    completed) and reports the progress, and the trial stops there if it is paused or preempted; a restarted
    trial skips the checkpointed batches. At the end: a last checkpoint, the wrapped reducers are reported, and
    `on_finish()` runs on every rank.

    `batch_size` (default 1, or `dataloader_kwargs["batch_size"]`); `max_batches`: at most that many batches per
    rank (ignored with a warning when not positive or beyond the shard); `dataloader_kwargs`: the other arguments
    of the DataLoader (not `shuffle=True`, `sampler` or `batch_sampler`); `distributed_context`: the ranks, when
    not those of the launcher (`python3 -m determined.launch.torch_distributed`). Runs inside a trial only.
    """
    if not os.environ.get("DET_TRIAL_ID"):
        raise errors.DeterminedError(
            "torch_batch_process only runs inside a trial, as in Determined 0.38: it checkpoints its position and "
            "reports progress to the master. Submit the script as an experiment's entrypoint "
            "(`det experiment create config.yaml .`)"
        )
    if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int) or checkpoint_interval <= 0:
        raise ValueError(f"checkpoint_interval should be a positive integer, got {checkpoint_interval!r}")
    kwargs = dict(dataloader_kwargs or {})
    batch_size = _batch_size(kwargs, batch_size)
    if not logging.getLogger().handlers:
        # As in Determined 0.38, the run's progress lines are shown (INFO, on stdout: the trial's logs).
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stdout)
    if not isinstance(dataset, Sized):
        raise ValueError(
            f"torch_batch_process needs a dataset with __len__() (a map-style dataset); {type(dataset).__name__} has "
            "none"
        )
    with core.init(distributed=distributed_context, preempt_mode=core.PreemptMode.WorkersAskChief) as core_context:
        slots = int((core_context.info.config.get("resources") or {}).get("slots_per_trial") or 1)
        if slots > 1 and core_context.distributed.size == 1:
            raise ValueError(
                f"the trial has {slots} slots but this process is the only one: on several slots, start the script "
                "through a launcher, e.g. entrypoint: python3 -m determined.launch.torch_distributed python3 "
                "inference.py"
            )
        joined = distributed_context is None and _distributed.init_process_group(
            core_context.distributed, get_default_device(core_context))
        try:
            _run(core_context, batch_processor_cls, dataset, batch_size, max_batches, checkpoint_interval, kwargs)
        finally:
            if joined:
                _distributed.destroy_process_group()


def _batch_size(kwargs: Dict[str, Any], batch_size: Optional[int]) -> int:
    if kwargs.get("shuffle"):
        raise ValueError("dataloader_kwargs: 'shuffle' must be false for accurate sharding and checkpointing")
    for given in ("sampler", "batch_sampler"):
        if given in kwargs:
            raise ValueError(f"dataloader_kwargs: remove {given!r}; torch_batch_process shards the dataset itself")
    kwargs.pop("shuffle", None)
    if batch_size is not None and "batch_size" in kwargs:
        raise ValueError("batch_size is given both to torch_batch_process and in dataloader_kwargs; give it once")
    if batch_size is None:
        batch_size = kwargs.pop("batch_size", DEFAULT_BATCH_SIZE)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def _batches_per_rank(max_batches: Optional[int], per_rank: int) -> int:
    """How many batches each rank iterates: its share, rounded up so that every rank takes part in every
    checkpoint (a rank whose shard is shorter by one batch just has nothing to process at the end)."""
    if max_batches is None:
        return per_rank
    if max_batches <= 0 or max_batches > per_rank:
        logger.warning("torch_batch_process: max_batches=%s is %s; processing the whole shard (%d batches) once",
                       max_batches, "not positive" if max_batches <= 0 else "beyond the shard", per_rank)
        return per_rank
    return max_batches


def _run(
    core_context: core.Context,
    processor_cls: Type[TorchBatchProcessor],
    dataset: Any,
    batch_size: int,
    max_batches: Optional[int],
    checkpoint_interval: int,
    kwargs: Dict[str, Any],
) -> None:
    dist = core_context.distributed
    rank, size = dist.get_rank(), dist.get_size()
    skip, output_uuid = _restore_position(core_context)
    context = TorchBatchProcessorContext(core_context, output_uuid)
    processor = processor_cls(context=context)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, **kwargs).get_data_loader(
        repeat=False, skip=skip, num_replicas=size, rank=rank)
    dataset_len = len(dataset)
    total = _batches_per_rank(max_batches, math.ceil(dataset_len / batch_size / size))
    if skip:
        logger.info("torch_batch_process: resuming after %d batches per rank (of %d)", skip, total)
    batches = iter(loader)
    steps_completed = skip
    checkpointed = skip
    for batch_idx in range(skip, total):
        batch = next(batches, None)
        if batch is not None:
            processor.process_batch(batch=batch, batch_idx=batch_idx)
        steps_completed = batch_idx + 1
        if steps_completed % checkpoint_interval:
            continue
        processor.on_checkpoint_start()
        _checkpoint_position(core_context, steps_completed, output_uuid)
        checkpointed = steps_completed
        if rank == 0 and dataset_len:
            core_context.train.report_progress(min(1.0, steps_completed * size * batch_size / dataset_len))
        if core_context.preempt.should_preempt():
            logger.info("torch_batch_process: stopping after %d batches per rank (the trial is preempted or "
                        "paused); it goes on from there when it runs again", steps_completed)
            context._reduce_and_report(steps_completed)
            return
    if steps_completed > checkpointed:
        processor.on_checkpoint_start()
        _checkpoint_position(core_context, steps_completed, output_uuid)
    context._reduce_and_report(steps_completed)
    processor.on_finish()
    if rank == 0 and context._use_default_storage:
        logger.info("torch_batch_process: files stored with upload_path() are at %s/%s",
                    _describe_storage(core_context), output_uuid)
    dist.allgather(None)  # every rank finished before the run counts as complete
    if rank == 0:
        core_context.train.report_progress(1.0)


def _restore_position(core_context: core.Context) -> "tuple[int, str]":
    """(batches per rank already done, the outputs' uuid): from the trial's latest checkpoint, else (0, new)."""
    dist = core_context.distributed
    latest = core_context.info.latest_checkpoint
    if latest is None:
        return 0, dist.broadcast(str(uuid.uuid4()) if dist.get_rank() == 0 else None)
    metadata = core_context.checkpoint.get_metadata(latest)
    if STEPS_KEY not in metadata or OUTPUT_KEY not in metadata:
        raise errors.DeterminedError(
            f"checkpoint {latest} was not written by torch_batch_process (its metadata lacks {STEPS_KEY!r} and "
            f"{OUTPUT_KEY!r}); a batch inference trial resumes only from its own position checkpoints"
        )
    logger.info("torch_batch_process: checkpoint %s: %s batches per rank were processed", latest, metadata[STEPS_KEY])
    return int(metadata[STEPS_KEY]), str(metadata[OUTPUT_KEY])


def _checkpoint_position(core_context: core.Context, steps_completed: int, output_uuid: str) -> None:
    """Every rank calls it at once; the chief checkpoints the smallest position of all ranks."""
    positions = core_context.distributed.gather(steps_completed)
    if positions is None:
        return
    done = min(positions)
    with core_context.checkpoint.store_path({STEPS_KEY: done, OUTPUT_KEY: output_uuid}) as (path, _storage_id):
        (path / "batch_completed.json").write_text(f'{{"batch_completed": {done}}}\n')
