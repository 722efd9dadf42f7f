"""Helpers of the server tests: a `det master up` subprocess, and the records an experiment left in the database."""
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

from sqlalchemy import select

from determined.common.api import Session
from determined.master.db import Checkpoint, SearcherEvent, TrainingMetrics, Trial, ValidationMetrics
from determined.master.db import engine as db_engine
from determined.master.embedded import running_master_url
from tests import _patience, _postgres

SERVE_FAKE = pathlib.Path(__file__).with_name("_serve_fake.py")
FAKE_TRIAL_ENV = {"FAKE_CHUNK": "5", "FAKE_SLEEP": "0.05", "FAKE_CKPT_EVERY": "20"}


def wait_for(what: Callable[[], Any], timeout: float = 60.0, message: str = "") -> Any:
    """Poll `what()` until true; fail after `timeout` s x the machine's load factor (tests/_patience.py)."""
    return _patience.wait_for(what, timeout, message or str(what), interval=0.1)


def server_db_url() -> Optional[str]:
    """The database a test's server uses: a fresh PostgreSQL database under DET_TEST_DB=postgres, else SQLite."""
    return _postgres.fresh_database_url() if _postgres.wanted() else None


class ServerProcess:
    """`det master up --port 0` on 127.0.0.1 in a subprocess (with the fake trial program unless `fake=False`)."""

    def __init__(self, data_dir: pathlib.Path, *, db: Optional[str] = None, cpu_slots: int = 2, fake: bool = True,
                 env: Optional[Dict[str, str]] = None, preemption_timeout: float = 20.0,
                 args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.db = db
        self.cpu_slots = cpu_slots
        self.fake = fake
        fake_dir = data_dir.parent / "fake"  # the fake trial's records and markers
        fake_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **FAKE_TRIAL_ENV, "FAKE_DIR": str(fake_dir), **(env or {})}
        self.preemption_timeout = preemption_timeout
        self.args = list(args)  # more options of `det master up`
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.url = ""
        self.log = data_dir.parent / f"master-{data_dir.name}.log"
        self.runs = 0

    def argv(self) -> List[str]:
        program = [sys.executable, str(SERVE_FAKE)] if self.fake else [sys.executable, "-m", "determined.cli.main"]
        argv = program + ["master", "up", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(self.data_dir),
                          "--cpu-slots", str(self.cpu_slots), "--preemption-timeout", str(self.preemption_timeout)]
        return argv + (["--db", self.db] if self.db else []) + self.args

    def start(self, timeout: float = 90.0) -> "ServerProcess":
        self.runs += 1
        with open(self.log, "ab") as log:
            log.write(f"\n==== run {self.runs}\n".encode())
            self.proc = subprocess.Popen(self.argv(), env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"det master up exited with {self.proc.returncode}:\n{self.output()}")
            lock = _read_json(self.data_dir / "master.lock")
            return bool(lock and lock.get("pid") == self.proc.pid and running_master_url(self.data_dir, wait=0))
        wait_for(ready, timeout, "det master up to serve")
        self.url = str((_read_json(self.data_dir / "master.lock") or {})["url"])
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def session(self) -> Session:
        return Session(self.url)

    def signal(self, signum: int, timeout: float = 60.0) -> int:
        """Send `signum` to the master by its pid and wait for it to exit; returns the exit status."""
        assert self.proc is not None
        os.kill(self.proc.pid, signum)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.signal(signal.SIGTERM, timeout=60)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)

    def trial_pids(self) -> Dict[int, int]:
        """The trial processes this master started: {trial id: pid}."""
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.pid:
                    continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            except (OSError, ValueError, IndexError):
                continue
            if b"DET_TRIAL_ID" in env:
                found[int(env[b"DET_TRIAL_ID"])] = int(entry)
        return found


def _read_json(path: pathlib.Path) -> Optional[Dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclasses.dataclass
class TrialRecords:
    trial_id: int
    state: str
    restarts: int
    training_steps: List[int]
    validation_steps: List[int]
    checkpoints: Dict[str, int]  # uuid -> steps_completed

    @property
    def reported_batches(self) -> int:
        return max(self.training_steps + self.validation_steps + [0])

    @property
    def latest_checkpoint_steps(self) -> int:
        return max(self.checkpoints.values(), default=0)


def records(data_dir: pathlib.Path, db: Optional[str], experiment_id: int) -> Dict[int, TrialRecords]:
    """What the database holds for an experiment's trials, read directly (the master may be dead)."""
    engine = db_engine.make_engine(db or db_engine.default_db_url(data_dir))
    try:
        with engine.connect() as conn:
            trials = conn.execute(select(Trial.id, Trial.state, Trial.restarts)
                                  .where(Trial.experiment_id == experiment_id).order_by(Trial.id)).all()
            out = {}
            for trial_id, state, restarts in trials:
                training = conn.scalars(select(TrainingMetrics.steps_completed)
                                        .where(TrainingMetrics.trial_id == trial_id).order_by(TrainingMetrics.id)).all()
                validation = conn.scalars(select(ValidationMetrics.steps_completed)
                                          .where(ValidationMetrics.trial_id == trial_id).order_by(ValidationMetrics.id)).all()
                ckpts = conn.execute(select(Checkpoint.uuid, Checkpoint.steps_completed)
                                     .where(Checkpoint.trial_id == trial_id)).all()
                out[trial_id] = TrialRecords(trial_id, state, restarts, list(training), list(validation), dict(ckpts))
            return out
    finally:
        engine.dispose()


def searcher_journal(data_dir: pathlib.Path, db: Optional[str], experiment_id: int) -> List[Dict[str, Any]]:
    engine = db_engine.make_engine(db or db_engine.default_db_url(data_dir))
    try:
        with engine.connect() as conn:
            return [dict(e) for e in conn.scalars(select(SearcherEvent.event).where(
                SearcherEvent.experiment_id == experiment_id).order_by(SearcherEvent.id))]
    finally:
        engine.dispose()


@dataclasses.dataclass
class Figures:
    batches_lost: int
    metric_records_lost: int
    metric_records_duplicated: int
    checkpoints_lost: int

    def line(self, what: str) -> str:
        return (f"{what}: batches lost (work redone since the latest checkpoint) = {self.batches_lost}; "
                f"metric records lost: {self.metric_records_lost}, duplicated: {self.metric_records_duplicated}; "
                f"checkpoints lost: {self.checkpoints_lost}")


def figures(before: Dict[int, TrialRecords], after: Dict[int, TrialRecords], length: int, chunk: int) -> Figures:
    """Compare the records at the failure with the records at the end of a completed experiment.

    Every trial must end with exactly one training record per chunk (`chunk`, 2*`chunk`, ... `length`) and one
    validation at `length`; every checkpoint recorded before the failure must still be recorded.
    """
    expected_training = list(range(chunk, length + 1, chunk))
    lost = duplicated = 0
    for rec in after.values():
        lost += len(set(expected_training) - set(rec.training_steps)) + (0 if length in rec.validation_steps else 1)
        duplicated += (len(rec.training_steps) - len(set(rec.training_steps))
                       + len(rec.validation_steps) - len(set(rec.validation_steps)))
        duplicated += len(set(rec.training_steps) - set(expected_training))
    redone = sum(max(0, rec.reported_batches - rec.latest_checkpoint_steps) for rec in before.values()
                 if rec.state not in ("COMPLETED", "CANCELED", "ERROR"))
    checkpoints_lost = sum(len(set(rec.checkpoints) - set(after[t].checkpoints if t in after else {}))
                           for t, rec in before.items())
    return Figures(redone, lost, duplicated, checkpoints_lost)
