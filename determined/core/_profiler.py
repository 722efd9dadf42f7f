"""System metrics of a trial (Determined 0.30+'s `core_context.profiler`): CPU, memory, disk, network and GPU.

`on()` starts a thread on the chief (rank 0: the system metrics of its machine) that samples every
`sampling_interval` seconds and, every `samples_per_report` samples, reports the averages as the metric groups
`cpu`, `memory`, `disk`, `network` and (when `nvidia-smi` finds GPUs) `gpu`. The x-axis of these groups is the time of the report in
seconds since the epoch (they are not rolled back when a trial restarts from a checkpoint).
"""
import logging
import shutil
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import psutil

from determined.common.metric_groups import SYSTEM_GROUPS
from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")

Report = Callable[[str, int, Dict[str, Any]], None]


class _Rates:
    """Per-second rates of growing counters between two samples."""

    def __init__(self, read: Callable[[], Dict[str, float]]) -> None:
        self._read = read
        self._last_time = time.monotonic()
        self._last = read()

    def sample(self) -> Dict[str, float]:
        now, values = time.monotonic(), self._read()
        elapsed = max(now - self._last_time, 1e-6)
        rates = {name: (values[name] - self._last.get(name, values[name])) / elapsed for name in values}
        self._last_time, self._last = now, values
        return rates


def _disk_counters() -> Dict[str, float]:
    io = psutil.disk_io_counters()
    if io is None:
        return {}
    return {"disk_throughput_read": io.read_bytes, "disk_throughput_write": io.write_bytes,
            "disk_iops": io.read_count + io.write_count}


def _network_counters() -> Dict[str, float]:
    io = psutil.net_io_counters()
    return {"net_throughput_sent": io.bytes_sent, "net_throughput_recv": io.bytes_recv}


def _gpu_sample() -> Dict[str, float]:
    """Utilization and memory of each GPU nvidia-smi lists (empty without one)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,memory.total",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    sample: Dict[str, float] = {}
    for line in out.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        try:
            index, util, used, total = fields[0], float(fields[1]), float(fields[2]), float(fields[3])
        except (IndexError, ValueError):
            continue
        sample.update({f"gpu{index}_util": util, f"gpu{index}_memory_used_mb": used,
                       f"gpu{index}_free_memory_mb": total - used})
    return sample


class _Sampler(threading.Thread):
    def __init__(self, report: Report, sampling_interval: float, samples_per_report: int) -> None:
        super().__init__(name="determined-profiler", daemon=True)
        self._report = report
        self._interval = sampling_interval
        self._per_report = samples_per_report
        self._stop_event = threading.Event()
        self._disk = _Rates(_disk_counters)
        self._network = _Rates(_network_counters)
        self._gpus = shutil.which("nvidia-smi") is not None
        psutil.cpu_percent()  # the first call only starts the measurement
        self._samples: Dict[str, List[Dict[str, float]]] = {group: [] for group in SYSTEM_GROUPS}

    def _sample(self) -> None:
        memory = psutil.virtual_memory()
        self._samples["cpu"].append({"cpu_util_simple": psutil.cpu_percent()})
        self._samples["memory"].append({"memory_free": memory.available, "memory_used_percent": memory.percent})
        disk = self._disk.sample()
        disk["disk_util"] = psutil.disk_usage("/").percent
        self._samples["disk"].append(disk)
        self._samples["network"].append(self._network.sample())
        if self._gpus:
            gpu = _gpu_sample()
            if gpu:
                self._samples["gpu"].append(gpu)

    def _flush(self) -> None:
        when = int(time.time())
        for group, samples in self._samples.items():
            if not samples:
                continue
            keys = {k for sample in samples for k in sample}
            averages = {k: sum(s.get(k, 0.0) for s in samples) / len(samples) for k in sorted(keys)}
            samples.clear()
            try:
                self._report(group, when, averages)
            except Exception as e:  # profiling must never fail the training
                logger.warning("profiler: could not report %s metrics: %s", group, e)

    def run(self) -> None:
        count = 0
        while not self._stop_event.wait(self._interval):
            self._sample()
            count += 1
            if count % self._per_report == 0:
                self._flush()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
        self._flush()


class ProfilerContext:
    """`core_context.profiler`: `on()` starts sampling system metrics, `off()` stops (both idempotent)."""

    def __init__(self, report: Report, distributed: DistributedContext) -> None:
        self._report = report
        self._distributed = distributed
        self._sampler: Optional[_Sampler] = None

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Sample every `sampling_interval` seconds (at least 0.1) and report averages every `samples_per_report`
        samples, on the chief (a no-op on the other ranks, and when already on)."""
        if isinstance(sampling_interval, bool) or not isinstance(sampling_interval, (int, float)) \
                or sampling_interval < 0.1:
            raise ValueError(f"profiler.on(): sampling_interval must be at least 0.1 (seconds), got "
                             f"{sampling_interval!r}")
        if isinstance(samples_per_report, bool) or not isinstance(samples_per_report, int) or samples_per_report < 1:
            raise ValueError(f"profiler.on(): samples_per_report must be an int >= 1, got {samples_per_report!r}")
        if self._sampler is not None or self._distributed.rank != 0:
            return
        logger.info("profiler on: system metrics every %s s, reported every %d samples", sampling_interval,
                    samples_per_report)
        self._sampler = _Sampler(self._report, float(sampling_interval), samples_per_report)
        self._sampler.start()

    def off(self) -> None:
        """Stop sampling; what was sampled since the last report is reported now."""
        if self._sampler is None:
            return
        sampler, self._sampler = self._sampler, None
        sampler.stop()
        logger.info("profiler off")
