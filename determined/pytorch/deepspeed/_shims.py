"""Adjustments of DeepSpeed's internals (checked with DeepSpeed 0.19), all in this module."""
import importlib


def skip_shm_comm_op() -> None:
    """Keep DeepSpeed's communication backend from compiling its shared-memory op on CPU.

    On its CPU accelerator, DeepSpeed 0.19 compiles a C++ op (deepspeed_shm_comm, minutes on a busy 2-core
    machine the first time) whenever its backend starts, but uses it only in ``inference_all_reduce`` (tensor-
    parallel inference); training reduces gradients through torch.distributed (gloo) either way. A DeepSpeedTrial
    therefore starts without it.
    """
    try:
        ds_comm_torch = importlib.import_module("deepspeed.comm.torch")
    except ImportError:  # another layout of DeepSpeed: it builds what it builds
        return
    if callable(getattr(ds_comm_torch, "build_shm_op", None)):
        ds_comm_torch.build_shm_op = lambda: None
