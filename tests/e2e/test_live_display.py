"""The live display of `det experiment create` in a real terminal (a pseudo-terminal read by the pyte VT100
emulator): at 160 and then 80 columns it shows progress, elapsed time, an ETA and batches per second over a
trials table that fits the width without cutting numbers; Ctrl-C pauses the experiment, waits for the trials
to checkpoint and prints the final table with the batches they really kept."""
import fcntl
import json
import os
import pathlib
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from typing import Callable, List

import pyte
import pytest
import yaml

from tests.e2e._helpers import det_json

HERE = pathlib.Path(__file__).resolve().parent
CORE_TRIAL = HERE.parent / "ui" / "core_trial.py"
ROWS = 40
ARTIFACTS = pathlib.Path(os.environ.get("DET_TEST_ARTIFACTS") or HERE.parent / "ui" / "artifacts")


def keep(name: str, lines: List[str]) -> None:
    """The screen as text, kept beside the UI screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.txt").write_text("\n".join(lines).rstrip() + "\n")


def _own_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pseudo-terminal (so ^C is a SIGINT)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`det` running under a pseudo-terminal whose screen is kept by pyte."""

    def __init__(self, argv: List[str], columns: int, cwd: pathlib.Path) -> None:
        self.screen = pyte.Screen(columns, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.fd, slave = pty.openpty()
        self.resize(columns)
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("COLUMNS", None)
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                                     preexec_fn=_own_terminal)
        os.close(slave)
        self.raw = b""

    def resize(self, columns: int) -> None:
        self.screen.resize(ROWS, columns)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
        if getattr(self, "proc", None) is not None:
            os.killpg(self.proc.pid, signal.SIGWINCH)

    def pump(self, seconds: float = 0.2) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the process ended and closed the terminal
                return
            if not data:
                return
            self.raw += data
            self.stream.feed(data)

    def lines(self) -> List[str]:
        return [line.rstrip() for line in self.screen.display]

    def wait_for(self, predicate: Callable[[List[str]], bool], timeout: float, what: str) -> List[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump()
            if predicate(self.lines()):
                return self.lines()
            if self.proc.poll() is not None:
                self.pump(0.5)
                break
        raise AssertionError(f"timed out waiting for {what}; screen:\n" + "\n".join(self.lines()))

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")  # the terminal sends SIGINT to its foreground process group


HEADER = re.compile(r"Experiment 1 ACTIVE  (\d+\.\d)%  elapsed (\S+(?: \S+)?)  ETA (\S+(?: \S+)?)  "
                    r"([\d.]+) batches/s  trials 2  best validation_loss")


def live(lines: List[str]) -> bool:
    """The header (on one or two lines, as the width allows) says how far, how long, how fast; the table is there."""
    start = next((i for i, line in enumerate(lines) if line.startswith("Experiment 1 ACTIVE")), None)
    if start is None or not any(line.startswith("Trial  State") for line in lines):
        return False
    header = HEADER.match("  ".join(lines[start:start + 2]).replace("  Trial  State", "")) or HEADER.match(lines[start])
    return bool(header) and float(header[1]) > 0


def check_fits(lines: List[str], columns: int) -> List[List[str]]:
    """Every line fits; the trials table's rows, split into cells."""
    assert all(len(line) <= columns for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("Trial  State"))
    rows = []
    for line in lines[start + 2:]:
        if not re.match(r"^\s*\d+\*?\s", line):
            break
        rows.append(line.split())
    assert len(rows) == 2, lines
    for cells in rows:
        assert "…" not in " ".join(cells) and cells[1] == "RUNNING" and cells[2].isdigit(), cells
    return rows


@pytest.mark.slow
def test_live_display_at_160_and_80_columns_then_ctrl_c(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(CORE_TRIAL, model / "core_trial.py")
    config = {
        "description": "live display", "entrypoint": "core_trial:unused",
        "searcher": {"name": "random", "metric": "validation_loss", "max_length": {"batches": 100000}, "max_trials": 2},
        "hyperparameters": {"global_batch_size": 1, "x": {"type": "double", "minval": 0, "maxval": 1},
                            "noise": {"type": "double", "minval": 0, "maxval": 1},
                            "learning_rate": {"type": "log", "minval": -5, "maxval": -1},
                            "sleep": 0.02, "report_every": 5},
        "internal": {"native": {"command": ["core_trial.py"]}}, "max_restarts": 0,
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
    term = Terminal([sys.executable, "-m", "determined", "experiment", "create", "--cpu-slots", "2",
                     str(tmp_path / "cfg.yaml"), str(model)], 160, tmp_path)
    try:
        wide = term.wait_for(live, 120, "the live display at 160 columns")
        keep("live-display-160", wide)
        check_fits(wide, 160)
        header = next(line for line in wide if line.startswith("Trial  State"))
        assert header.split()[-1] == "x", "at 160 columns the searched hyperparameter x is a column"
        term.resize(80)
        term.pump(1.0)
        narrow = term.wait_for(lambda lines: live(lines) and all(len(line) <= 80 for line in lines)
                               and any(line.startswith("(not shown to fit 80 columns: ") for line in lines), 30,
                               "the live display at 80 columns")
        keep("live-display-80", narrow)
        check_fits(narrow, 80)
        term.ctrl_c()
        final = term.wait_for(lambda lines: any("is paused; resume it with: det experiment activate 1" in line
                                                for line in lines), 90, "the final table after Ctrl-C")
        keep("live-display-ctrl-c", final)
        assert term.proc.wait(timeout=60) == 0
    finally:
        if term.proc.poll() is None:
            os.killpg(term.proc.pid, signal.SIGKILL)
            term.proc.wait()
        os.close(term.fd)
    text = "\n".join(final)
    assert "Pausing experiment 1: running trials checkpoint first" in term.raw.decode(errors="replace")
    desc = det_json("experiment", "describe", "1")
    assert desc["state"] == "PAUSED"
    kept = {t["id"]: t["total_batches"] for t in desc["trials"]}
    assert all(batches > 0 for batches in kept.values()), kept  # they checkpointed what they trained
    for trial_id, batches in kept.items():
        assert re.search(rf"^\s*{trial_id}\*?\s+PAUSED\s+{batches}\s", text, re.MULTILINE), text
    checkpoints = {c["trial_id"]: c["steps_completed"] for c in desc["checkpoints"]}
    assert checkpoints == kept
    assert json.loads(json.dumps(desc["trials"][0]["status"])) == "PAUSED"
