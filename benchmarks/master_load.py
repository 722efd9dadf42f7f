"""Load test of the master: concurrent trials reporting batched training metrics to `det master up`.

For each database (SQLite in a temporary data dir, PostgreSQL on a throwaway server started here like the
test fixture, with PostgreSQL's durable defaults), the script starts `det master up` on 127.0.0.1 with
--cpu-slots 32, creates a 32-trial experiment whose trial processes only hold their slot (`sleep`), reads each
running trial's session token from the database and then, for --duration seconds, has 32 concurrent
simulated trials POST /trials/{id}/training_metrics with `--batches` batch metrics per report, the way the
harness reports them. Afterwards it counts the rows in the database while the master still runs.

A "metric row" is one batch's training metrics (an entry of `batch_metrics`); a report carries --batches of
them. Printed: reports and metric rows acknowledged and found in the database (lost must be 0), metric rows
per second, and the p50/p99 latency of the report route seen by the clients.

    .venv/bin/python benchmarks/master_load.py            # a few minutes on each database
    .venv/bin/python benchmarks/master_load.py --quick    # ~20 s on each database
"""
import argparse
import asyncio
import base64
import gzip
import io
import json
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from determined.common.api import Session  # noqa: E402
from determined.master.db import TrainingMetrics, Trial  # noqa: E402
from determined.master.db import engine as db_engine  # noqa: E402

HOLD_SLOT_COMMAND = ("sleep", "1000000")  # a trial process that only holds its slot while the clients report


def _serve(argv: List[str]) -> int:
    """`det master up ...` with trial processes that only hold their slots."""
    from determined.cli.main import main
    from determined.master.rm import local

    local.DEFAULT_TRIAL_COMMAND = HOLD_SLOT_COMMAND
    return main(["master", "up", *argv])


def _model_def() -> str:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        data = b"class T:\n    pass\n"
        info = tarfile.TarInfo("model.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def _config(trials: int) -> Dict[str, Any]:
    return {
        "entrypoint": "model:T",
        "searcher": {"name": "random", "metric": "loss", "max_length": {"batches": 10**9}, "max_trials": trials},
        "hyperparameters": {"global_batch_size": 32, "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1}},
        "max_restarts": 0,
    }


class Master:
    """`det master up` in a subprocess, stopped by its pid."""

    def __init__(self, data_dir: pathlib.Path, db_url: Optional[str], trials: int) -> None:
        argv = ["--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir), "--cpu-slots", str(trials),
                "--preemption-timeout", "2"] + (["--db", db_url] if db_url else [])
        self.data_dir = data_dir
        self.log = open(data_dir.parent / "master.log", "wb")
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", *argv], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"det master up exited: {self.output()}")
            try:
                lock = json.loads((self.data_dir / "master.lock").read_text())
                if lock.get("pid") == self.proc.pid and lock.get("url"):
                    httpx.get(lock["url"] + "/api/v1/master/info", timeout=2).raise_for_status()
                    return str(lock["url"])
            except (OSError, ValueError, httpx.HTTPError):
                pass
            time.sleep(0.2)
        raise RuntimeError("det master up did not start serving")

    def output(self) -> str:
        self.log.flush()
        return (self.data_dir.parent / "master.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def _tokens(db_url: str, experiment_id: int, trials: int, timeout: float = 120.0) -> List[Tuple[int, str]]:
    """(trial id, session token) of every trial once all of them run."""
    engine = db_engine.make_engine(db_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = conn.execute(select(Trial.id, Trial.session_token).where(
                    Trial.experiment_id == experiment_id, Trial.session_token.is_not(None))).all()
            if len(rows) == trials:
                return [(int(t), str(tok)) for t, tok in rows]
            time.sleep(0.2)
        raise RuntimeError(f"only {len(rows)} of {trials} trials started")
    finally:
        engine.dispose()


def _count(db_url: str, experiment_id: int) -> Tuple[int, int]:
    """(training reports, batch metric rows) stored for the experiment."""
    engine = db_engine.make_engine(db_url)
    try:
        length = func.json_array_length(TrainingMetrics.batch_metrics)
        trial_ids = select(Trial.id).where(Trial.experiment_id == experiment_id)
        with engine.connect() as conn:
            reports, rows = conn.execute(select(func.count(), func.coalesce(func.sum(length), 0))
                                         .where(TrainingMetrics.trial_id.in_(trial_ids))).one()
        return int(reports), int(rows)
    finally:
        engine.dispose()


class _Connection:
    """A keep-alive HTTP/1.1 connection with just enough client to POST JSON: httpx costs the client more CPU
    per request than the master spends answering it, which would make this benchmark measure the client."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.reader: Optional[asyncio.StreamReader] = None
        self.writer: Optional[asyncio.StreamWriter] = None

    async def post(self, path: str, token: str, body: bytes) -> Tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAuthorization: Bearer {token}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        fields = dict(line.split(":", 1) for line in head[1:] if ":" in line)
        length = {k.strip().lower(): v.strip() for k, v in fields.items()}.get("content-length")
        if length is None:
            raise RuntimeError(f"HTTP {status} without a Content-Length: {head}")
        return status, await self.reader.readexactly(int(length))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _trial_client(url: str, trial_id: int, token: str, batches: int, start_at: float, stop_at: float,
                        latencies: List[float], acked: List[int]) -> None:
    connection = _Connection(url)
    path = f"/api/v1/trials/{trial_id}/training_metrics"
    steps = 0
    await asyncio.sleep(max(0.0, start_at - time.time()))
    try:
        while time.time() < stop_at:
            body = {"steps_completed": steps + batches,
                    "metrics": {"loss": 1.0 / (steps + batches)},
                    "batch_metrics": [{"loss": 1.0 / (steps + i + 1), "accuracy": 0.5, "lr": 0.01}
                                      for i in range(batches)]}
            started = time.perf_counter()
            status, text = await connection.post(path, token, json.dumps(body).encode())
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"trial {trial_id}: HTTP {status}: {text[:300]!r}")
            steps += batches
            acked[0] += 1
    finally:
        connection.close()


async def _client_process_load(url: str, tokens: List[Tuple[int, str]], batches: int, start_at: float,
                               stop_at: float) -> Tuple[List[float], int]:
    latencies: List[float] = []
    acked = [0]
    await asyncio.gather(*[_trial_client(url, t, tok, batches, start_at, stop_at, latencies, acked)
                           for t, tok in tokens])
    return latencies, acked[0]


def _client_process(url: str, tokens: List[Tuple[int, str]], batches: int, start_at: float, stop_at: float,
                    results: Any) -> None:
    """One client process: its share of the simulated trials; puts (latencies, reports acked, CPU s) in `results`."""
    try:
        latencies, acked = asyncio.run(_client_process_load(url, tokens, batches, start_at, stop_at))
        results.put((latencies, acked, time.process_time()))
    except BaseException as e:
        results.put(e)
        raise


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by process `pid`, from /proc."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load(url: str, tokens: List[Tuple[int, str]], batches: int, duration: float, processes: int,
          server_pid: int) -> Dict[str, Any]:
    """The simulated trials, spread over `processes` client processes so the client is not the bottleneck."""
    shares = [tokens[i::processes] for i in range(processes) if tokens[i::processes]]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 3.0  # time for the client processes to start
    procs = [ctx.Process(target=_client_process, args=(url, share, batches, start_at, start_at + duration, queue))
             for share in shares]
    for proc in procs:
        proc.start()
    time.sleep(max(0.0, start_at - time.time()))
    server_cpu = _cpu_seconds(server_pid)
    results = [queue.get() for _ in procs]
    elapsed = time.time() - start_at
    server_cpu = _cpu_seconds(server_pid) - server_cpu
    for proc in procs:
        proc.join()
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise RuntimeError(f"a client process failed: {failures[0]}")
    latencies = sorted(x for r in results for x in r[0])
    acked = sum(r[1] for r in results)
    return {"elapsed_s": elapsed, "reports_acked": acked, "rows_acked": acked * batches,
            "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
            "client_processes": len(shares), "client_cpu_s": sum(r[2] for r in results), "server_cpu_s": server_cpu}


def run(database: str, duration: float, trials: int, batches: int, processes: int = 2) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="det-load-") as tmp:
        data_dir = pathlib.Path(tmp) / "data"
        pg = None
        db_url: Optional[str] = None
        if database == "postgres":
            from tests._postgres import PostgresServer

            pg = PostgresServer(durable=True).start()
            db_url = pg.create_database("det_load")
        master = None
        try:
            master = Master(data_dir, db_url, trials)
            session = Session(master.url)
            exp_id = int(session.post("/experiments", {"config": _config(trials), "model_definition": _model_def()})
                         ["experiment"]["id"])
            store = db_engine.normalize_db_url(db_url) if db_url else db_engine.default_db_url(data_dir)
            tokens = _tokens(store, exp_id, trials)
            result = _load(master.url, tokens, batches, duration, processes, master.proc.pid)
            reports, rows = _count(store, exp_id)
            result.update(database=database, trials=trials, batches_per_report=batches, reports_in_db=reports,
                          rows_in_db=rows, rows_lost=result["rows_acked"] - rows,
                          rows_per_s=result["rows_acked"] / result["elapsed_s"],
                          reports_per_s=result["reports_acked"] / result["elapsed_s"])
            return result
        finally:
            if master is not None:
                master.stop()
            if pg is not None:
                pg.stop()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        return _serve(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of load per database (default 180)")
    parser.add_argument("--quick", action="store_true", help="20 s per database")
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--trials", type=int, default=32, help="concurrent simulated trials (default 32)")
    parser.add_argument("--batches", type=int, default=100, help="batch metrics per report (default 100)")
    parser.add_argument("--client-processes", type=int, default=2,
                        help="processes the simulated trials are spread over (default 2)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    duration = 20.0 if args.quick else args.duration
    results = []
    for database in (["sqlite", "postgres"] if args.db == "both" else [args.db]):
        print(f"{database}: {args.trials} trials reporting {args.batches} batches per report for {duration:.0f} s …",
              flush=True)
        r = run(database, duration, args.trials, args.batches, args.client_processes)
        results.append(r)
        print(f"  reports acknowledged {r['reports_acked']} (in the database {r['reports_in_db']}); metric rows "
              f"acknowledged {r['rows_acked']} (in the database {r['rows_in_db']}, lost {r['rows_lost']})\n"
              f"  {r['rows_per_s']:,.0f} metric rows/s ({r['reports_per_s']:,.1f} reports/s); report latency "
              f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms\n"
              f"  CPU seconds: master {r['server_cpu_s']:.1f}, {r['client_processes']} client processes "
              f"{r['client_cpu_s']:.1f} (of {r['elapsed_s']:.0f} s on {os.cpu_count()} cores)", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if all(r["rows_lost"] == 0 and r["reports_in_db"] == r["reports_acked"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
