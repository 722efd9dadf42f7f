"""A full disk under the master's data dir (issue 19, row 7): `det master up` on SQLite on a small tmpfs.

While the disk is full the master keeps its state machine right (every trial exit is recorded once it can be),
drops trial log lines with a counted marker, never loses its log writer, and recovers by itself when space
returns: the experiment completes with no acknowledged metric lost or duplicated.
"""
import os
import pathlib
import shutil
import sqlite3
import subprocess
import time
from typing import Iterator, List

import pytest

from tests import _postgres
from tests.master._helpers import config, model_def

from ._server import ServerProcess, figures, records, wait_for

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a tmpfs: needs root"),
    pytest.mark.skipif(_postgres.wanted(), reason="the disk that fills is the SQLite database's"),
]
LENGTH, CHUNK = 40, 5


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    path = tmp_path / "disk"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: pathlib.Path) -> pathlib.Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # again: only what was freed meanwhile
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _truncate_wal(db: pathlib.Path) -> None:
    """Make the next write need new space: SQLite appends to its WAL file, which this empties."""
    conn = sqlite3.connect(str(db), timeout=10)
    try:
        for _ in range(50):
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return
            time.sleep(0.05)
    finally:
        conn.close()


def test_a_full_disk_is_survived_and_recovered_from(small_disk: pathlib.Path, capsys: pytest.CaptureFixture) -> None:
    data_dir = small_disk / "data"
    server = ServerProcess(data_dir, env={"FAKE_SLEEP": "0.02", "FAKE_CKPT_EVERY": "10"})
    server.log = small_disk.parent / "master.log"  # the master's own output is not on the small disk
    server.start()
    try:
        session = server.session()
        exp_id = int(session.post("/experiments", {"config": config(max_trials=2, length=LENGTH, max_restarts=5),
                                                   "model_definition": model_def()})["experiment"]["id"])
        wait_for(lambda: all(t["latest_checkpoint_uuid"] for t in session.get(f"/experiments/{exp_id}")["trials"]),
                 60, "both trials past a checkpoint")
        _truncate_wal(data_dir / "determined.db")
        filler = _fill(small_disk)
        before = records(data_dir, None, exp_id)
        wait_for(lambda: "could not record the exit" in server.output(), 60, "trial exits refused by the full disk")
        def writer_refused() -> bool:
            """The log writer meets the full disk too, at a flush of lines that come while it is full: on a busy
            machine that can be after a failed run's files were removed, so what they freed is taken again."""
            if "could not store" in server.output():
                return True
            _fill(small_disk)
            return False
        wait_for(writer_refused, 60, "the log writer refused by the full disk")
        filler.unlink()

        wait_for(lambda: session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "COMPLETED", 120,
                 "the experiment to complete once the disk has space")
        after = records(data_dir, None, exp_id)
        numbers = figures(before, after, LENGTH, CHUNK)
        with capsys.disabled():
            print("\n" + numbers.line("a full disk under the data dir"))
        assert (numbers.metric_records_lost, numbers.metric_records_duplicated, numbers.checkpoints_lost) == (0, 0, 0)
        logs: List[str] = []
        for trial in session.get(f"/experiments/{exp_id}")["trials"]:
            logs += [e["message"] for e in session.get(f"/trials/{trial['id']}/logs", {"limit": 1000})["logs"]]
        assert any(m.startswith("[master] ") and "log line(s) dropped: disk full" in m for m in logs), logs
        assert any(m.startswith("[master] run ") and "failed with exit code" in m and "restart 1 of" in m for m in logs), logs
        restarted = [m for m in logs if m.startswith("fake trial") and "starts at batch" in m and "batch 0" not in m]
        assert restarted, "lines logged after the recovery are stored: the log writer lives on"
        assert "Exception in thread" not in server.output(), "no thread of the master died"
        assert "recorded the exits of" in server.output()
    finally:
        server.stop()
