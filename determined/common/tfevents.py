"""TensorBoard event files written without TensorFlow, PyTorch or the tensorboard package: the format and where
each trial's files live, shared by trial processes (determined.core._tensorboard) and the master (the files it
writes from stored metrics, determined.master.insights.tensorboard).

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, data, masked CRC-32C of the
data), each holding an `Event` protocol buffer; scalars are `Summary.Value.simple_value`. The few fields used
are encoded here by hand. Each trial writes under `<master data dir>/tensorboard/experiment_<E>/trial_<T>/`
(see `trial_dir`).
"""
import logging
import math
import os
import pathlib
import socket
import struct
import threading
import time
from typing import Any, List, Mapping, Optional

logger = logging.getLogger("determined.core")

TENSORBOARD_DIR = "tensorboard"
_CRC_TABLE: List[int] = []


def _crc32c(data: bytes) -> int:
    if not _CRC_TABLE:
        for i in range(256):
            crc = i
            for _ in range(8):
                crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
            _CRC_TABLE.append(crc)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int = 0, *, scalars: Optional[Mapping[str, float]] = None,
                 file_version: Optional[str] = None) -> bytes:
    """An `Event` protobuf: wall_time (1, double), step (2, int64), file_version (3) or summary (5) of
    `Value{tag (1), simple_value (2, float)}`."""
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time)
    if step:
        out += _varint(2 << 3) + _varint(int(step))
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    if scalars:
        values = b"".join(
            _field_bytes(1, _field_bytes(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", float(value)))
            for tag, value in scalars.items()
        )
        out += _field_bytes(5, values)
    return out


def encode_record(data: bytes) -> bytes:
    """One TFRecord around `data`."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", _masked_crc(header)) + data + struct.pack("<I", _masked_crc(data))


class EventFileWriter:
    """Appends scalar events to a new `events.out.tfevents.*` file in `directory` (flushed after each write)."""

    _count = 0
    _count_lock = threading.Lock()

    def __init__(self, directory: "str | os.PathLike[str]") -> None:
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        with EventFileWriter._count_lock:
            EventFileWriter._count += 1
            count = EventFileWriter._count
        now = time.time()
        name = f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}.{os.getpid()}.{count}"
        self.path = self.directory / name
        self._file = open(self.path, "ab")
        self._lock = threading.Lock()
        self.write_event(encode_event(now, file_version="brain.Event:2"))

    def write_event(self, event: bytes) -> None:
        """Append one serialized `Event` protocol buffer (and flush)."""
        with self._lock:
            self._file.write(encode_record(event))
            self._file.flush()

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: Optional[float] = None) -> None:
        """One event at `step` with a scalar per tag; values that are not finite numbers are left out."""
        kept = {tag: float(v) for tag, v in scalars.items() if is_scalar(v)}
        if kept:
            self.write_event(encode_event(time.time() if wall_time is None else wall_time, step, scalars=kept))

    def close(self) -> None:
        with self._lock:
            self._file.close()


def is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def experiment_dir(root: "str | os.PathLike[str]", experiment_id: int) -> pathlib.Path:
    """`<root>/experiment_<id>`: the TensorBoard logdir of one experiment (one run per trial)."""
    return pathlib.Path(root) / f"experiment_{int(experiment_id)}"


def trial_dir(root: "str | os.PathLike[str]", experiment_id: int, trial_id: int) -> pathlib.Path:
    """`<root>/experiment_<E>/trial_<T>`; `root` is `<master data dir>/tensorboard` for trials of a local master."""
    return experiment_dir(root, experiment_id) / f"trial_{int(trial_id)}"


def has_event_files(directory: "str | os.PathLike[str]") -> bool:
    path = pathlib.Path(directory)
    return path.is_dir() and any(p.name.startswith("events.out.tfevents.") for p in path.iterdir())


def write_metrics(writer: EventFileWriter, group: str, steps_completed: int, metrics: Mapping[str, Any],
                  wall_time: Optional[float] = None) -> None:
    """Scalars tagged `<group>/<metric name>` (group: `training` or `validation`) at step `steps_completed`."""
    writer.add_scalars(steps_completed, {f"{group}/{name}": v for name, v in metrics.items()}, wall_time)
