"""Finding the slots of this machine: GPUs when there are any, CPU slots otherwise."""
import dataclasses
import os
import re
import shutil
import subprocess
from typing import List, Optional


@dataclasses.dataclass(frozen=True)
class Slots:
    """The slots a local resource manager hands out: `gpus` (device ids) or `cpu_count` CPU slots."""

    gpus: List[str]
    cpu_count: int

    @property
    def total(self) -> int:
        return len(self.gpus) if self.gpus else self.cpu_count

    @property
    def kind(self) -> str:
        return "gpu" if self.gpus else "cpu"


def detect_gpus() -> List[str]:
    """GPU ids from CUDA_VISIBLE_DEVICES when set, else from `nvidia-smi -L`; empty when none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [m.group(1) for m in re.finditer(r"^GPU (\d+):", out, flags=re.M)]


def cpu_slots() -> int:
    """DET_CPU_SLOTS when set, else os.cpu_count()."""
    value = os.environ.get("DET_CPU_SLOTS")
    if value:
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"DET_CPU_SLOTS: expected a positive integer, got {value!r}") from None
        if count <= 0:
            raise ValueError(f"DET_CPU_SLOTS: expected a positive integer, got {value!r}")
        return count
    return os.cpu_count() or 1


def detect_slots(cpu_count: Optional[int] = None) -> Slots:
    """The machine's slots; `cpu_count` overrides the CPU slot count when there are no GPUs."""
    gpus = detect_gpus()
    return Slots(gpus=gpus, cpu_count=cpu_count if cpu_count is not None else cpu_slots())
