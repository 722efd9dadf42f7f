"""Moving batches of any nesting of tensors, arrays, tuples, lists and dicts to a device."""
from typing import Any

import numpy as np
import torch


def to_device(data: Any, device: torch.device, non_blocking: bool = True) -> Any:
    """`data` with every tensor moved to `device` and every numpy array turned into a tensor there.

    Tuples (named ones included), lists and dicts keep their type; other values are returned as they are.
    """
    if isinstance(data, torch.Tensor):
        if data.device == device:
            return data
        return data.to(device, non_blocking=non_blocking)
    kind = type(data)
    if kind is tuple or kind is list:  # the usual batch: when every item is a tensor already there, keep it
        on_cpu = device.type == "cpu"  # is_cpu then answers without making a device object per tensor, as .device
        for value in data:
            if type(value) is not torch.Tensor or (not value.is_cpu if on_cpu else value.device != device):
                break
        else:
            return data
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data).to(device, non_blocking=non_blocking)
    if isinstance(data, dict):
        moved_dict = {key: to_device(value, device, non_blocking) for key, value in data.items()}
        if type(data) is dict:
            return moved_dict
        try:
            return type(data)(moved_dict)
        except TypeError:  # e.g. defaultdict, whose first argument is a factory
            return moved_dict
    if isinstance(data, tuple):
        moved = [to_device(value, device, non_blocking) for value in data]
        return type(data)(*moved) if hasattr(data, "_fields") else type(data)(moved)
    if isinstance(data, list):
        return [to_device(value, device, non_blocking) for value in data]
    return data
