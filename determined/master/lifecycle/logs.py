"""Trial logs: lines from trial processes, written to the database in batches by one thread.

Limits keep one trial from filling the master's disk: a line longer than `LogLimits.line_bytes` is cut (the
stored line ends with a marker saying how many bytes were cut), and once a trial has `LogLimits.trial_bytes`
of logs its further lines are dropped: a marker says so when it happens, and another counts the dropped lines
when its run ends. A batch the database refuses (a full disk: `database or disk is full`, ENOSPC) is dropped,
the writer thread goes on, and the next batch it stores starts with a marker per trial: "N log lines dropped:
disk full". Markers are lines of the stream "stderr" that start with "[master] ".
"""
import collections
import dataclasses
import datetime
import errno
import logging
import queue
import threading
from typing import Callable, Dict, List, Optional, Set, Tuple

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from determined.master.db import TrialLog
from determined.master.rm.log_lines import DEFAULT_LINE_BYTES, MARKER, cap_line, size_text

logger = logging.getLogger("determined.master")

Line = Tuple[int, datetime.datetime, str, str]
DEFAULT_TRIAL_BYTES = 256 * 1024 * 1024
MAX_QUEUED_LINES = 200_000  # lines waiting for the writer; beyond, new lines are dropped and counted
_VOLUME_CHUNK = 500  # trials whose stored log volume one query reads
_RUN_ENDED = "\0run-ended"  # a queue entry, not a line: a run of the trial ended


@dataclasses.dataclass(frozen=True)
class LogLimits:
    """`line_bytes`: the longest line stored (longer ones are cut); `trial_bytes`: the logs one trial may keep."""

    line_bytes: int = DEFAULT_LINE_BYTES
    trial_bytes: int = DEFAULT_TRIAL_BYTES

    def __post_init__(self) -> None:
        if self.line_bytes < 256:
            raise ValueError(f"log_line_max_bytes must be at least 256, got {self.line_bytes}")
        if self.trial_bytes < self.line_bytes:
            raise ValueError(f"trial_log_max_bytes ({self.trial_bytes}) must be at least log_line_max_bytes "
                             f"({self.line_bytes})")


@dataclasses.dataclass
class _Dropped:
    lines: int = 0
    size: int = 0

    def add(self, message: str) -> None:
        self.lines += 1
        self.size += len(message)


class LogWriter:
    """Collects log lines from any thread and inserts them every `interval` seconds (see the module's doc)."""

    def __init__(self, session_factory: Callable[[], Session], interval: float = 0.25,
                 limits: Optional[LogLimits] = None) -> None:
        self._session_factory = session_factory
        self._interval = interval
        self.limits = limits or LogLimits()
        self._queue: "queue.Queue[Line]" = queue.Queue()
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()  # keeps lines in capture order across flushing threads
        self._thread = threading.Thread(target=self._run, name="trial-log-writer", daemon=True)
        # Owned by the flushing thread (under _flush_lock):
        self._volume: Dict[int, int] = {}  # characters stored per trial
        self._over: Dict[int, _Dropped] = collections.defaultdict(_Dropped)  # over the trial's limit
        self._lost: Dict[Tuple[int, str], _Dropped] = collections.defaultdict(_Dropped)  # not stored: why
        self._failing = False
        self._overflow: Dict[int, _Dropped] = collections.defaultdict(_Dropped)  # queue full (any thread)
        self._overflow_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def add(self, trial_id: int, timestamp: datetime.datetime, stream: str, message: str) -> None:
        message = cap_line(message, self.limits.line_bytes)
        if self._queue.qsize() >= MAX_QUEUED_LINES:
            with self._overflow_lock:
                self._overflow[trial_id].add(message)
            return
        self._queue.put((trial_id, timestamp, stream, message))

    def run_ended(self, trial_id: int) -> None:
        """A run of the trial ended: store the count of its lines dropped over the trial's limit, if any."""
        self._queue.put((trial_id, _now(), _RUN_ENDED, ""))

    def flush(self) -> None:
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        lines: List[Line] = []
        while True:
            try:
                lines.append(self._queue.get_nowait())
            except queue.Empty:
                break
        with self._overflow_lock:
            overflow, self._overflow = self._overflow, collections.defaultdict(_Dropped)
        for trial_id, dropped in overflow.items():
            key = (trial_id, "the master could not store them as fast as they came")
            self._lost[key].lines += dropped.lines
            self._lost[key].size += dropped.size
        if not lines and not self._lost:
            return
        volume, over = dict(self._volume), {k: dataclasses.replace(v) for k, v in self._over.items()}
        try:
            with self._session_factory() as s, s.begin():
                rows = self._markers_of_lost() + self._admit(s, lines)
                if rows:
                    s.execute(insert(TrialLog), rows)
        except Exception as e:  # the thread must live on: count what is lost, say it once, store it later
            self._volume, self._over = volume, collections.defaultdict(_Dropped, over)
            reason = "disk full" if is_disk_full(e) else f"the database refused them ({e.__class__.__name__})"
            for trial_id, _, stream, message in lines:
                if stream != _RUN_ENDED:
                    self._lost[(trial_id, reason)].add(message)
            if not self._failing:
                logger.error("could not store %s trial log line(s): %s; they are counted and dropped until the "
                             "database takes writes again", len(lines), _first_line(e))
            self._failing = True
            return
        if self._failing:
            logger.warning("trial logs are stored again")
        self._failing = False
        self._lost.clear()

    def _markers_of_lost(self) -> List[Dict[str, object]]:
        now = _now()
        return [_row(trial_id, now, "stderr", f"{MARKER}{d.lines} log line(s) dropped: {reason}")
                for (trial_id, reason), d in sorted(self._lost.items())]

    def _admit(self, s: Session, lines: List[Line]) -> List[Dict[str, object]]:
        """The rows to insert: lines within their trial's limit, the limit's markers."""
        rows: List[Dict[str, object]] = []
        limit = self.limits.trial_bytes
        self._read_volumes(s, {trial_id for trial_id, _, _, _ in lines if trial_id not in self._volume})
        for trial_id, ts, stream, message in lines:
            if stream == _RUN_ENDED:
                over = self._over.pop(trial_id, None)
                if over is not None and over.lines:
                    rows.append(_row(trial_id, ts, "stderr", f"{MARKER}{over.lines} log line(s) ({over.size} "
                                                             f"characters) dropped: over the trial's log limit"))
                continue
            volume = self._volume[trial_id]
            if volume + len(message) > limit:
                if trial_id not in self._over:
                    rows.append(_row(trial_id, ts, "stderr",
                                     f"{MARKER}this trial's logs reached the limit of {size_text(limit)}: further "
                                     "lines are dropped and counted (trial_log_max_bytes in the master config)"))
                self._over[trial_id].add(message)
                continue
            self._volume[trial_id] = volume + len(message)
            rows.append(_row(trial_id, ts, stream, message))
        return rows

    def _read_volumes(self, s: Session, trial_ids: Set[int]) -> None:
        """The characters stored so far for trials this writer has not seen yet: one grouped query per flush (a
        tick that starts and ends many runs writes the first lines of many trials at once)."""
        wanted = sorted(trial_ids)
        for start in range(0, len(wanted), _VOLUME_CHUNK):
            chunk = wanted[start:start + _VOLUME_CHUNK]
            for trial_id in chunk:
                self._volume[trial_id] = 0
            rows = s.execute(select(TrialLog.trial_id, func.coalesce(func.sum(func.length(TrialLog.message)), 0))
                             .where(TrialLog.trial_id.in_(chunk)).group_by(TrialLog.trial_id))
            for trial_id, volume in rows:
                self._volume[int(trial_id)] = int(volume or 0)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush()
            except Exception:  # never expected (flush catches the database's errors); the thread must not die
                logger.exception("trial log writer: flush failed")
        self.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for trial_id in list(self._over):
            self.run_ended(trial_id)
        self.flush()


def _row(trial_id: int, ts: datetime.datetime, stream: str, message: str) -> Dict[str, object]:
    return {"trial_id": trial_id, "timestamp": ts, "stream": stream, "message": message}


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [e.__class__.__name__])[0][:300]


def is_disk_full(e: BaseException) -> bool:
    """Whether `e` (an error of the database or of a file) means the disk is full."""
    cur: Optional[BaseException] = e
    for _ in range(5):
        if cur is None:
            break
        if getattr(cur, "errno", None) == errno.ENOSPC:
            return True
        text = str(cur).lower()
        if "database or disk is full" in text or "no space left on device" in text or "disk full" in text:
            return True
        cur = getattr(cur, "orig", None) or cur.__cause__ or cur.__context__
    return False
