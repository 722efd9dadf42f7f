"""Horovod's torch collectives (`determined.horovod.hvd`) over the trial's torch.distributed process group.

Only the calls with a torch.distributed equivalent are here, with Horovod's semantics: out-of-place `allreduce`
(average by default), `allgather` of first dimensions that may differ between ranks, `broadcast`, the `*_object`
forms, and the rank/size queries. Without a process group (one slot, or code outside a trial) the world is one
process and every collective returns (a copy of) its input. Unknown names raise an AttributeError that says what
Horovod call has no counterpart and what to use.
"""
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import torch
import torch.distributed as dist

from determined import errors

Average, Sum, Adasum, Min, Max, Product = "Average", "Sum", "Adasum", "Min", "Max", "Product"

_OPS = {Sum: "SUM", Min: "MIN", Max: "MAX", Product: "PRODUCT"}

_NO_COUNTERPART = {
    "DistributedOptimizer": "the platform synchronizes gradients itself: use context.wrap_model/wrap_optimizer",
    "broadcast_optimizer_state": "the platform restores the optimizer on every rank from its checkpoint",
    "join": "every rank trains the same number of batches here",
    "add_process_set": "process sets have no counterpart; use torch.distributed.new_group",
    "remove_process_set": "process sets have no counterpart; use torch.distributed.new_group",
    "SyncBatchNorm": "use torch.nn.SyncBatchNorm.convert_sync_batchnorm",
}


def _group_up() -> bool:
    if dist.is_available() and dist.is_initialized():
        return True
    if int(os.environ.get("WORLD_SIZE") or 1) > 1:
        raise errors.DeterminedError(
            "determined.horovod.hvd: this process is one of several workers but has no torch.distributed process "
            "group yet; hvd's collectives work inside a PyTorchTrial (after its __init__ starts), over the trial's "
            "group")
    return False


def init(*args: Any, **kwargs: Any) -> None:
    """Horovod's `hvd.init()`: the platform has already joined the process group; this checks the environment."""
    _group_up()


def is_initialized() -> bool:
    """True when collectives can run: inside the trial's process group, or alone (one process)."""
    if dist.is_available() and dist.is_initialized():
        return True
    return int(os.environ.get("WORLD_SIZE") or 1) == 1


def size() -> int:
    return dist.get_world_size() if _group_up() else 1


def rank() -> int:
    return dist.get_rank() if _group_up() else 0


def local_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE") or size())


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK") or rank())


def cross_size() -> int:
    return int(os.environ.get("DET_CROSS_SIZE") or max(1, size() // local_size()))


def cross_rank() -> int:
    return int(os.environ.get("DET_CROSS_RANK") or rank() // local_size())


def _reduce_op(op: Optional[str], average: Optional[bool]) -> str:
    if op is None:
        op = Sum if average is False else Average
    if op == Adasum:
        raise errors.DeterminedError("hvd.allreduce(op=hvd.Adasum): Adasum has no torch.distributed counterpart; "
                                     "use hvd.Average or hvd.Sum")
    if op != Average and op not in _OPS:
        raise ValueError(f"hvd.allreduce: unknown op {op!r}; use one of Average, Sum, Min, Max, Product")
    return op


def allreduce_(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
               op: Optional[str] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               **kwargs: Any) -> torch.Tensor:
    """Reduce `tensor` across the ranks in place (Horovod's default op averages) and return it."""
    op = _reduce_op(op, average)
    if prescale_factor != 1.0:
        tensor.mul_(prescale_factor)
    if _group_up() and dist.get_world_size() > 1:
        dist.all_reduce(tensor, op=getattr(dist.ReduceOp, _OPS.get(op, "SUM")))
        if op == Average:
            if tensor.is_floating_point() or tensor.is_complex():
                tensor.div_(dist.get_world_size())
            else:
                tensor.floor_divide_(dist.get_world_size())
    if postscale_factor != 1.0:
        tensor.mul_(postscale_factor)
    return tensor


def allreduce(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
              op: Optional[str] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              **kwargs: Any) -> torch.Tensor:
    """A new tensor: `tensor` reduced across the ranks (averaged unless `op` or `average=False` says otherwise)."""
    return allreduce_(tensor.detach().clone(), average, name, op, prescale_factor, postscale_factor)


def grouped_allreduce(tensors: List[torch.Tensor], average: Optional[bool] = None, name: Optional[str] = None,
                      op: Optional[str] = None, **kwargs: Any) -> List[torch.Tensor]:
    return [allreduce(t, average=average, op=op, **kwargs) for t in tensors]


def allgather(tensor: torch.Tensor, name: Optional[str] = None, **kwargs: Any) -> torch.Tensor:
    """The ranks' tensors concatenated along the first dimension, in rank order (first dimensions may differ)."""
    if not (_group_up() and dist.get_world_size() > 1):
        return tensor.detach().clone()
    world = dist.get_world_size()
    one = tensor.reshape(1, *tensor.shape[1:]) if tensor.dim() == 0 else tensor
    lengths = torch.tensor([one.shape[0]], dtype=torch.long, device=one.device)
    all_lengths = [torch.zeros_like(lengths) for _ in range(world)]
    dist.all_gather(all_lengths, lengths)
    longest = int(max(int(n.item()) for n in all_lengths))
    padded = torch.zeros((longest, *one.shape[1:]), dtype=one.dtype, device=one.device)
    padded[: one.shape[0]] = one
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([p[: int(n.item())] for p, n in zip(parts, all_lengths)], dim=0)


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None, **kwargs: Any) -> torch.Tensor:
    """`tensor` set in place to rank `root_rank`'s value."""
    if _group_up() and dist.get_world_size() > 1:
        dist.broadcast(tensor, src=root_rank)
    return tensor


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None, **kwargs: Any) -> torch.Tensor:
    """A new tensor holding rank `root_rank`'s value of `tensor`."""
    return broadcast_(tensor.detach().clone(), root_rank)


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None, **kwargs: Any) -> Any:
    """Rank `root_rank`'s `obj` (any picklable object) on every rank."""
    if not (_group_up() and dist.get_world_size() > 1):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=root_rank)
    return box[0]


def allgather_object(obj: Any, name: Optional[str] = None, **kwargs: Any) -> List[Any]:
    """Every rank's `obj`, in rank order."""
    if not (_group_up() and dist.get_world_size() > 1):
        return [obj]
    out: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_parameters(params: Union[Dict[str, torch.Tensor], Iterable[Tuple[str, torch.Tensor]]],
                         root_rank: int) -> None:
    """Set every rank's parameters (a state_dict or `named_parameters()`) to rank `root_rank`'s, in place."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    with torch.no_grad():
        for _, p in items:
            broadcast_(p.data if isinstance(p, torch.nn.Parameter) else p, root_rank)


def barrier(**kwargs: Any) -> None:
    if _group_up() and dist.get_world_size() > 1:
        dist.barrier()


def mpi_enabled() -> bool:
    return False


def gloo_enabled() -> bool:
    return _group_up() and dist.get_backend() == "gloo"


def nccl_built() -> bool:
    return bool(dist.is_available() and dist.is_nccl_available())


def __getattr__(name: str) -> Any:
    why = _NO_COUNTERPART.get(name, "use torch.distributed, whose process group the trial's workers share")
    raise AttributeError(f"determined.horovod.hvd.{name}: Horovod is not available on this platform and this call "
                         f"has no counterpart here; {why}")


__all__ = [
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "init", "is_initialized", "size", "rank", "local_size",
    "local_rank", "cross_size", "cross_rank", "allreduce", "allreduce_", "grouped_allreduce", "allgather",
    "broadcast", "broadcast_", "broadcast_object", "allgather_object", "broadcast_parameters", "barrier",
    "mpi_enabled", "gloo_enabled", "nccl_built",
]
