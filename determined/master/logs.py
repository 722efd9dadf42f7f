"""Trial logs: lines from trial processes, written to the database in batches by one thread."""
import datetime
import queue
import threading
from typing import Callable, List, Tuple

from sqlalchemy import insert
from sqlalchemy.orm import Session

from determined.master.db import TrialLog

Line = Tuple[int, datetime.datetime, str, str]


class LogWriter:
    """Collects log lines from any thread and inserts them every `interval` seconds."""

    def __init__(self, session_factory: Callable[[], Session], interval: float = 0.25) -> None:
        self._session_factory = session_factory
        self._interval = interval
        self._queue: "queue.Queue[Line]" = queue.Queue()
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()  # keeps lines in capture order across flushing threads
        self._thread = threading.Thread(target=self._run, name="trial-log-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, trial_id: int, timestamp: datetime.datetime, stream: str, message: str) -> None:
        self._queue.put((trial_id, timestamp, stream, message))

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
        if not lines:
            return
        rows = [{"trial_id": t, "timestamp": ts, "stream": st, "message": m} for t, ts, st, m in lines]
        with self._session_factory() as s, s.begin():
            s.execute(insert(TrialLog), rows)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()
        self.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.flush()
