"""Trial log limits and a database that refuses writes: the log writer cuts, counts, survives and recovers."""
import datetime
import io
import pathlib

from sqlalchemy import event, select, text

from determined.master import Master
from determined.master.lifecycle import actions
from determined.master.db import TrialLog
from determined.master.lifecycle.logs import LogLimits, LogWriter
from determined.master.rm.log_lines import cap_line, capped_lines
from tests.master._helpers import config, model_def


class _Pipe(io.RawIOBase):
    """A pipe that yields a line of `size` bytes without ever holding it: memory stays bounded only if the reader
    never asks for the whole line at once."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.tail = b"\nnext line\n"
        self.largest_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: "memoryview") -> int:  # type: ignore[override]
        self.largest_read = max(self.largest_read, len(buffer))
        if self.left > 0:
            n = min(len(buffer), self.left)
            buffer[:n] = b"x" * n
            self.left -= n
            return n
        n = min(len(buffer), len(self.tail))
        buffer[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


def test_a_200_mib_line_is_cut_while_it_is_read_in_small_pieces() -> None:
    size = 200 * 1024 * 1024
    pipe = _Pipe(size)
    lines = list(capped_lines(io.BufferedReader(pipe, buffer_size=1 << 16), 1024))
    assert len(lines) == 2 and lines[1] == "next line"
    assert lines[0].startswith("x" * 1024) and lines[0].endswith(f"[{size - 1024} bytes cut: the line was longer "
                                                                  "than the 1 KiB limit]")
    assert pipe.largest_read <= 1 << 17, "read in bounded pieces"
    assert cap_line(lines[0], 1024) == lines[0], "a cut line is not cut again"
    assert cap_line("é" * 600, 1024).startswith("é" * 512), "cut on whole UTF-8 characters"


def _writer(tmp_path: pathlib.Path, limits: LogLimits) -> "tuple[LogWriter, object]":
    """A log writer on a SQLite database (whatever DET_TEST_DB says: the tests fill SQLite) with trial 1 in it."""
    import base64

    data_dir = tmp_path / "data"
    master = Master(data_dir, f"sqlite:///{data_dir / 'logs.db'}", run_scheduler=False)
    canonical = actions.canonical_config(config(max_trials=1), str(data_dir))
    with master.write() as s:
        actions.create_experiment(s, canonical, base64.b64decode(model_def()))
    return LogWriter(master._writes, interval=3600, limits=limits), master.engine


def _messages(engine: object) -> list:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return list(conn.scalars(select(TrialLog.message).order_by(TrialLog.id)))


def test_a_trial_over_its_log_limit_gets_a_marker_and_a_count(tmp_path: pathlib.Path) -> None:
    writer, engine = _writer(tmp_path, LogLimits(line_bytes=256, trial_bytes=1000))
    now = datetime.datetime(2024, 1, 1)
    for i in range(30):
        writer.add(1, now, "stdout", f"line {i:02d} " + "y" * 90)
    writer.add(1, now, "stdout", "z" * 5000)
    writer.run_ended(1)
    writer.flush()
    messages = _messages(engine)
    assert messages[:10] == [f"line {i:02d} " + "y" * 90 for i in range(10)]
    assert "reached the limit of 1000 bytes" in messages[10]
    dropped = 20 * len("line 00 " + "y" * 90) + len(cap_line("z" * 5000, 256))
    assert messages[11] == f"[master] 21 log line(s) ({dropped} characters) dropped: over the trial's log limit"
    assert len(messages) == 12


def test_a_full_database_drops_counted_lines_and_the_writer_recovers(tmp_path: pathlib.Path) -> None:
    writer, engine = _writer(tmp_path, LogLimits())
    full = {"on": False, "pages": 1_000_000}

    def set_full(on: bool) -> None:
        with engine.connect() as conn:  # type: ignore[attr-defined]
            pages = conn.execute(text("PRAGMA page_count")).scalar()
        full["pages"] = pages
        full["on"] = on

    @event.listens_for(engine, "begin")  # type: ignore[misc]
    def _limit(conn: object) -> None:
        # SQLite's max_page_count makes the database "full" on demand: this connection cannot grow the file.
        conn.exec_driver_sql(f"PRAGMA max_page_count = {full['pages'] if full['on'] else 1_000_000}")  # type: ignore[attr-defined]

    set_full(True)
    writer.start()
    now = datetime.datetime(2024, 1, 1)
    for i in range(2000):
        writer.add(1, now, "stdout", f"line {i} " + "w" * 200)
    writer.flush()
    assert _messages(engine) == []
    assert writer._thread.is_alive(), "the writer thread lives on"
    set_full(False)
    writer.add(1, now, "stdout", "after the disk had space again")
    writer.flush()
    messages = _messages(engine)
    assert messages == ["[master] 2000 log line(s) dropped: disk full", "after the disk had space again"]
    writer.stop()
