"""torch.distributed for PyTorchTrials on several slots: the process group, DDP wrapping, gradient sync."""
import contextlib
import datetime
import inspect
import logging
import os
import socket
from typing import Any, Iterator, List

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from determined import core, errors
from determined.core._distributed import collective_timeout

logger = logging.getLogger("determined.pytorch")


class _DDP(DistributedDataParallel):
    """DistributedDataParallel that lets the trial keep using the attributes of its own model."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            module = self.__dict__.get("_modules", {}).get("module")
            if module is None or name == "module":
                raise
            return getattr(module, name)


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def init_process_group(distributed: core.DistributedContext, device: torch.device) -> bool:
    """Join the trial's torch.distributed process group (gloo on CPU, nccl on GPU); False when not needed.

    The rendezvous is MASTER_ADDR:MASTER_PORT when the launcher set them; otherwise the chief picks a
    free port and tells the other ranks through the core collectives.
    """
    if distributed.size <= 1 or (dist.is_available() and dist.is_initialized()):
        return False
    if not dist.is_available():
        raise errors.DeterminedError("this torch build has no torch.distributed; it cannot train on several slots")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not (addr and port):
        chosen = None
        if distributed.rank == 0:
            host = distributed.chief_ip or "127.0.0.1"
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                chosen = (host, sock.getsockname()[1])
        addr, port = distributed.broadcast(chosen)
    backend = backend_for(device)
    timeout = datetime.timedelta(seconds=collective_timeout())
    dist.init_process_group(
        backend=backend,
        init_method=f"tcp://{addr}:{port}",
        rank=distributed.rank,
        world_size=distributed.size,
        timeout=timeout,
    )
    logger.info("rank %d of %d joined the %s process group at %s:%s", distributed.rank, distributed.size,
                backend, addr, port)
    return True


def wrap_ddp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model` in DistributedDataParallel. Buffers are not broadcast in forward (as with Horovod): a forward
    pass then never waits for the other ranks, so validation can run on uneven shards or on the chief only."""
    if not (dist.is_available() and dist.is_initialized()):
        raise errors.DeterminedError(
            "wrap_model() with several slots needs the torch.distributed process group, which the "
            "PyTorchTrialController creates before the trial; build the trial through the platform"
        )
    device_ids = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else None
    # torch >= 2.12 names the forward-time sync `forward_sync_buffers`; buffers are still synced at init.
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return _DDP(model, device_ids=device_ids, forward_sync_buffers=False)
    return _DDP(model, device_ids=device_ids, broadcast_buffers=False)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's model inside a DDP wrapper (or the model itself)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


@contextlib.contextmanager
def gradient_sync(models: List[torch.nn.Module], sync: bool) -> Iterator[None]:
    """Inside, backward passes of DDP models exchange gradients only when `sync` (the k-th of k aggregated
    batches); otherwise they just accumulate locally."""
    with contextlib.ExitStack() as stack:
        if not sync:
            for model in models:
                if isinstance(model, DistributedDataParallel):
                    stack.enter_context(model.no_sync())
        yield


def destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
