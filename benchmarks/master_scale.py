"""The master at scale: learning curves of 1,000 trials, the scheduler tick of a 10,000-trial search, metric ingest.

Three parts, each printed with its figures (`make bench-scale` runs all three):

curves  A master (in this process, on 127.0.0.1) holds one experiment of --trials trials (created through
        POST /experiments; its runs are simulated and only hold their slots) with --points training reports and
        --validations validation reports per trial. The training reports are checked and stored by the master's
        own batch path, in-process (`protocol.training_report` + `protocol.store_training_reports`, what the
        training-metrics route does for a trial's token, in transactions of 20,000 reports): through HTTP, 10
        million reports would take hours on a 2-core machine. The validations go through
        `protocol.report_validation` (what the validation route calls), in transactions of 2 trials. Then it
        times, through HTTP: the experiment's learning curves as the UI page reads them (GET
        /experiments/{id}/metrics?max_points=N, first read after storing, first read after a start and later
        reads, size of the answer), the page's other reads, `det experiment describe` as a whole process and its
        API read, one trial's full training series, and a read after 32 trials reported again over HTTP.
ticks   A master whose resource manager runs simulated trials in threads of this process (each pulls its
        operation, reports a validation and completes it, through the master's protocol functions) works through
        a random search of --search-trials trials on --slots slots; every scheduler tick is timed.
ingest  `benchmarks/master_load.py` (32 trials reporting 100 batch metrics per report over HTTP to `det master
        up`) on PostgreSQL and on SQLite.

Everything runs in temporary directories that are removed at the end; the PostgreSQL servers are started here
(tests/_postgres.py) and stopped by their pid.

    .venv/bin/python benchmarks/master_scale.py                       # all parts at the full scale (~15 min)
    .venv/bin/python benchmarks/master_scale.py --parts curves --trials 100 --points 1000
"""
import argparse
import dataclasses
import datetime
import json
import math
import pathlib
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import httpx  # noqa: E402

from determined.master.insights import curves
from determined.master import embedded
from determined.master.lifecycle import protocol  # noqa: E402
from determined.master.lifecycle.experiment import get_trial  # noqa: E402
from determined.master.rm import Slots  # noqa: E402
from master_load import _model_def  # noqa: E402


class SimulatedRM:
    """A resource manager whose runs are simulated in this process: `hold` keeps every run until it is killed;
    otherwise `work(trial_id)` is run for each run on a pool of threads, and the run exits 0 when it returns."""

    def __init__(self, slots: int, work: Optional[Callable[[int], None]] = None, threads: int = 8) -> None:
        self.slots = Slots(gpus=[], cpu_count=slots)
        self.exit_listener: Optional[Callable[[], None]] = None
        self.work = work
        self._lock = threading.Lock()
        self._runs: Dict[str, Tuple[int, int]] = {}  # allocation id -> (trial id, slots)
        self._exited: List[Tuple[int, str, int]] = []
        self.tokens: Dict[int, str] = {}
        self.reaped = 0  # runs reported as ended so far
        self._queue: "queue.Queue[Optional[Tuple[int, str]]]" = queue.Queue()
        self._threads = [threading.Thread(target=self._worker, daemon=True) for _ in range(threads if work else 0)]
        for t in self._threads:
            t.start()

    @property
    def total_slots(self) -> int:
        return self.slots.total

    def free_slots(self) -> int:
        with self._lock:
            return self.slots.total - sum(n for _, n in self._runs.values())

    def running(self) -> Mapping[str, Any]:
        with self._lock:
            return dict(self._runs)

    def launch(self, *, trial_id: int, experiment_id: int, allocation_id: str, token: str, slots_needed: int,
               master_url: str, env: Optional[Mapping[str, str]] = None, script: bool = False) -> None:
        with self._lock:
            self._runs[allocation_id] = (trial_id, slots_needed)
            self.tokens[trial_id] = token
        if self.work is not None:
            self._queue.put((trial_id, allocation_id))

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            trial_id, allocation_id = item
            code = 0
            try:
                assert self.work is not None
                self.work(trial_id)
            except Exception as e:  # a simulated run that fails exits 1, as a process would
                print(f"  simulated trial {trial_id} failed: {e}", file=sys.stderr)
                code = 1
            self._exit(allocation_id, code)

    def _exit(self, allocation_id: str, code: int) -> None:
        with self._lock:
            run = self._runs.pop(allocation_id, None)
            if run is not None:
                self._exited.append((run[0], allocation_id, code))
        if self.exit_listener is not None:
            self.exit_listener()

    def poll_exited(self) -> List[Tuple[int, str, int]]:
        with self._lock:
            out, self._exited = self._exited, []
        self.reaped += len(out)
        return out

    def preempt(self, allocation_id: str, timeout: float) -> None:
        self._exit(allocation_id, 0)

    def enforce_deadlines(self) -> None:
        pass

    def kill(self, allocation_id: str) -> None:
        self._exit(allocation_id, 137)

    def kill_all(self) -> None:
        for allocation_id in list(self.running()):
            self.kill(allocation_id)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


def _config(trials: int, max_length: int, concurrent: int) -> Dict[str, Any]:
    return {
        "entrypoint": "model:T",
        "searcher": {"name": "random", "metric": "validation_loss", "max_length": {"batches": max_length},
                     "max_trials": trials, "max_concurrent_trials": concurrent},
        "hyperparameters": {"global_batch_size": 32, "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1}},
        "max_restarts": 0,
    }


def _client(url: str) -> httpx.Client:
    """An HTTP client of the master's API, logged in as `determined` (blank password)."""
    client = httpx.Client(base_url=url + "/api/v1", timeout=600)
    resp = client.post("/auth/login", json={"username": "determined", "password": ""})
    resp.raise_for_status()
    client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
    return client


def _timed(fn: Callable[[], Any], repeats: int) -> Tuple[List[float], Any]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return times, value


def _pg(database: str) -> Tuple[Any, Optional[str]]:
    if database != "postgres":
        return None, None
    from tests._postgres import PostgresServer

    pg = PostgresServer().start()
    return pg, pg.create_database("det_scale")


def _stop(master: Any, rm: Optional[SimulatedRM], pg: Any) -> None:
    """Stop what a part started: the master, the simulated runs' threads, the PostgreSQL server (by its pid)."""
    if master is not None:
        master.stop(timeout=10)
    if rm is not None:
        rm.close()
    if pg is not None:
        pg.stop()


# ---------------------------------------------------------------- curves


def _build(master: Any, tokens: Dict[int, str], points: int, validations: int, batch: int = 20000) -> Dict[str, float]:
    """Training reports through the master's batch store, validations through `protocol.report_validation` (what
    the validation route calls), each folded into the kept curves as it is stored."""
    engine = master.master.write_engine  # as the group commit writes (master.GroupCommit._transaction)
    trial_ids = sorted(tokens)
    started = time.perf_counter()
    every = max(1, points // validations)
    base = datetime.datetime(2026, 1, 1)
    pending: List[protocol.TrainingReport] = []

    def flush() -> None:
        with master.master.lock, engine.begin() as conn:  # the master's write lock, as its own writers take it
            outcomes = protocol.store_training_reports(conn, pending)
        assert not any(outcomes), [o for o in outcomes if o][:3]
        pending.clear()

    for tid in trial_ids:
        lr = 1.0 + (tid % 17) / 17.0
        for i in range(1, points + 1):
            loss = lr / math.sqrt(i) + 0.05 * math.sin(i * 0.37 + tid)
            report = protocol.training_report(tid, tokens[tid], {"steps_completed": i * 100, "metrics": {
                "loss": loss, "accuracy": 1.0 - loss / 3.0}})
            pending.append(dataclasses.replace(report, end_time=base + datetime.timedelta(seconds=i)))
            if len(pending) >= batch:
                flush()
    if pending:
        flush()
    training_s = time.perf_counter() - started
    started = time.perf_counter()
    for start in range(0, len(trial_ids), 2):  # through the validation route's function, 2 trials a transaction
        with master.master.write(wake=False) as s:
            for tid in trial_ids[start:start + 2]:
                trial = get_trial(s, tid)
                for k in range(1, validations + 1):
                    protocol.report_validation(s, trial, {"steps_completed": k * every * 100, "metrics": {
                        "validation_loss": 1.0 / math.sqrt(k) + (tid % 7) / 70.0}})
    return {"training_rows_per_s": len(trial_ids) * points / training_s, "training_s": training_s,
            "validation_s": time.perf_counter() - started}


def _checkpoints(master: Any, trial_ids: List[int], steps: int) -> None:
    """A checkpoint of each trial at its last report, as its run would report one: a master that stops rolls each
    running trial back to its latest checkpoint (allocations.py), which must keep every stored report."""
    for start in range(0, len(trial_ids), 200):
        with master.master.write(wake=False) as s:
            for tid in trial_ids[start:start + 200]:
                protocol.report_checkpoint(s, get_trial(s, tid), {"uuid": str(uuid.uuid4()), "steps_completed": steps,
                                                                  "resources": {"state_dict.pth": 1}})


def _start_master(data_dir: pathlib.Path, db_url: Optional[str], trials: int) -> Tuple[Any, SimulatedRM]:
    rm_box: List[SimulatedRM] = []

    def factory(_work: str, _sink: Any) -> SimulatedRM:
        rm_box.append(SimulatedRM(trials))
        return rm_box[0]

    master = embedded.start(data_dir, db_url=db_url, resource_manager=factory, preemption_timeout=5)
    return master, rm_box[0]


def _wait_running(rm: SimulatedRM, trials: int) -> None:
    deadline = time.monotonic() + 600
    while len(rm.tokens) < trials:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(rm.tokens)} of {trials} trials started")
        time.sleep(0.2)


def run_curves(database: str, trials: int, points: int, validations: int) -> Dict[str, Any]:
    pg, db_url = _pg(database)
    rm: Optional[SimulatedRM] = None
    master = None
    try:
        with tempfile.TemporaryDirectory(prefix="det-scale-") as tmp:
            data_dir = pathlib.Path(tmp) / "data"
            master, rm = _start_master(data_dir, db_url, trials)
            client = _client(master.url)
            exp_id = client.post("/experiments", json={"config": _config(trials, 10**9, trials),
                                                        "model_definition": _model_def()}).json()["experiment"]["id"]
            _wait_running(rm, trials)
            print(f"  {trials} trials running (simulated); storing {trials * points:,} training reports and "
                  f"{trials * validations:,} validations …", flush=True)
            built = _build(master, dict(rm.tokens), points, validations)
            _checkpoints(master, sorted(rm.tokens), points * 100)
            print(f"  stored in {built['training_s']:.0f} s ({built['training_rows_per_s']:,.0f} training reports/s "
                  f"through the batch store) + {built['validation_s']:.0f} s of validations", flush=True)
            ui_points = curves.default_max_points(trials)
            path = f"/experiments/{exp_id}/metrics"
            params = {"max_points": ui_points}

            def curves_read() -> httpx.Response:  # accepting gzip, as a browser does
                resp = client.get(path, params=params)
                resp.raise_for_status()
                return resp

            # The first read after storing: the training and validation curves were maintained as the reports were
            # stored (no point is read). What it answers is kept.
            first_ever, resp = _timed(curves_read, 1)
            print(f"  first read after storing: {first_ever[0]:.1f} s; restarting the master …", flush=True)
            client.close()
            _stop(master, rm, None)
            master = rm = None
            started = time.perf_counter()
            master, rm = _start_master(data_dir, db_url, trials)
            restart_s = time.perf_counter() - started
            client = _client(master.url)
            _wait_running(rm, trials)  # the trials' runs start again (from their checkpoints)
            cold, resp = _timed(curves_read, 1)
            warm, resp = _timed(curves_read, 5)
            answer = resp.json()
            kept = sum(len(t["training"]) for t in answer["trials"])
            assert all(t["training"] and t["training"][-1]["steps_completed"] == points * 100
                       for t in answer["trials"]), "the restart lost reports"
            page_reads = [f"/experiments/{exp_id}", f"/experiments/{exp_id}/searcher_progress"]
            page_html, _ = _timed(lambda: httpx.get(f"{master.url}/experiments/{exp_id}").raise_for_status(), 3)
            others = {p: _timed(lambda p=p: client.get(p).raise_for_status(), 3)[0] for p in page_reads}
            describe_api = others[f"/experiments/{exp_id}"]
            det = str(pathlib.Path(sys.executable).with_name("det"))
            cli, out = _timed(lambda: subprocess.run([det, "-m", master.url, "experiment", "describe", str(exp_id)],
                                                     capture_output=True, text=True, check=True), 3)
            assert "Trials" in out.stdout, out.stdout[-500:]
            first_trial = answer["trials"][0]["trial_id"]
            full, full_resp = _timed(lambda: client.get(f"/trials/{first_trial}/metrics",
                                                        params={"group": "training"}), 1)
            # 32 trials report again through the route: the next read refreshes only them
            for tid in sorted(rm.tokens)[:32]:
                r = httpx.post(f"{master.url}/api/v1/trials/{tid}/training_metrics",
                               headers={"Authorization": f"Bearer {rm.tokens[tid]}"},
                               json={"steps_completed": (points + 1) * 100, "metrics": {"loss": 0.01}})
                r.raise_for_status()
            after, resp2 = _timed(curves_read, 1)
            refreshed = {t["trial_id"]: t["training"][-1]["steps_completed"] for t in resp2.json()["trials"]}
            assert all(refreshed[tid] == (points + 1) * 100 for tid in sorted(rm.tokens)[:32])
            client.close()
            return {
                "database": database, "trials": trials, "points": points, "validations": validations,
                "max_points": ui_points, "kept_training_points": kept, "bytes": len(resp.content),
                "wire_bytes": resp.num_bytes_downloaded, "restart_s": restart_s,
                "curves_first_ever_s": first_ever[0],
                "curves_cold_s": cold[0], "curves_warm_s": statistics.median(warm),
                "curves_after_32_reports_s": after[0],
                "page_html_s": statistics.median(page_html),
                "page_reads_s": {p: statistics.median(v) for p, v in others.items()},
                "describe_api_s": statistics.median(describe_api), "describe_cli_s": statistics.median(cli),
                "one_trial_full_s": full[0], "one_trial_full_bytes": len(full_resp.content),
                **built,
            }
    finally:
        _stop(master, rm, pg)


# ---------------------------------------------------------------- scheduler ticks


def run_ticks(database: str, trials: int, slots: int, limit_s: float) -> Dict[str, Any]:
    pg, db_url = _pg(database)
    master = None
    rm: Optional[SimulatedRM] = None
    ticks: List[Tuple[float, float, int]] = []  # (seconds since start, tick seconds, runs it recorded as ended)
    try:
        with tempfile.TemporaryDirectory(prefix="det-ticks-") as tmp:
            box: List[Any] = []

            def work(trial_id: int) -> None:
                m = box[0].master
                while True:
                    with m.write() as s:
                        trial = get_trial(s, trial_id)
                        op = protocol.next_operation(s, trial)
                        if "length" in op:
                            metric = 1.0 / (1 + trial_id % 97)
                            protocol.report_validation(s, trial, {"steps_completed": op["length"],
                                                                  "metrics": {"validation_loss": metric}})
                            protocol.complete_operation(s, trial, {"length": op["length"], "metric": metric})
                            continue
                    if op.get("completed"):
                        return
                    time.sleep(0.02)

            def factory(_work: str, _sink: Any) -> SimulatedRM:
                box.append(SimulatedRM(slots, work=work, threads=min(slots, 8)))
                return box[-1]

            master = embedded.start(pathlib.Path(tmp) / "data", db_url=db_url, resource_manager=factory,
                                    preemption_timeout=5)
            rm = box[0]
            box[0] = master
            inner = master.master
            original = inner.tick
            started = time.perf_counter()

            def timed_tick() -> None:  # with the ended runs the tick recorded (Master.exits_recorded)
                t0, recorded = time.perf_counter(), inner.exits_recorded
                try:
                    original()
                finally:
                    ticks.append((t0 - started, time.perf_counter() - t0, inner.exits_recorded - recorded))

            inner.tick = timed_tick  # type: ignore[method-assign]
            client = _client(master.url)
            exp_id = client.post("/experiments", json={"config": _config(trials, 1, 0),
                                                        "model_definition": _model_def()}).json()["experiment"]["id"]
            deadline = time.monotonic() + limit_s
            state = "ACTIVE"
            while time.monotonic() < deadline:
                state = client.get(f"/experiments/{exp_id}").json()["experiment"]["state"]
                if state in ("COMPLETED", "ERROR", "CANCELED"):
                    break
                time.sleep(2)
            elapsed = time.perf_counter() - started
            made = client.get(f"/experiments/{exp_id}").json()["experiment"]["num_trials"]
            durations = sorted(d for _, d, _ in ticks)
            last = sorted(d for t, d, _ in ticks if t >= elapsed * 0.8) or durations
            quiet = sorted(d for _, d, n in ticks if n == 0) or [math.nan]
            with_exits = [(d, n) for _, d, n in ticks if n]
            per_exit = sum(d for d, _ in with_exits) / max(1, sum(n for _, n in with_exits))
            return {"database": database, "trials_asked": trials, "trials_created": made, "state": state,
                    "elapsed_s": elapsed, "ticks": len(ticks),
                    "tick_p50_ms": 1000 * durations[len(durations) // 2],
                    "tick_p95_ms": 1000 * durations[int(len(durations) * 0.95)],
                    "tick_max_ms": 1000 * durations[-1],
                    "quiet_ticks": len(quiet), "quiet_tick_p50_ms": 1000 * quiet[len(quiet) // 2],
                    "quiet_tick_p95_ms": 1000 * quiet[int(len(quiet) * 0.95)],
                    "tick_ms_per_ended_run": 1000 * per_exit,
                    "tick_p50_last_fifth_ms": 1000 * last[len(last) // 2],
                    "tick_p95_last_fifth_ms": 1000 * last[int(len(last) * 0.95)]}
    finally:
        _stop(master, rm, pg)


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="curves,ticks,ingest", help="comma-separated: curves, ticks, ingest")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite",
                        help="database of the curves and ticks parts (default sqlite; ingest runs on both)")
    parser.add_argument("--trials", type=int, default=1000, help="trials of the curves experiment (default 1000)")
    parser.add_argument("--points", type=int, default=10000, help="training reports per trial (default 10000)")
    parser.add_argument("--validations", type=int, default=100, help="validations per trial (default 100)")
    parser.add_argument("--search-trials", type=int, default=10000, help="trials of the search (default 10000)")
    parser.add_argument("--slots", type=int, default=32, help="slots of the search (default 32)")
    parser.add_argument("--ticks-limit", type=float, default=900.0, help="seconds the search may take (default 900)")
    parser.add_argument("--ingest-duration", type=float, default=60.0, help="seconds of ingest load per database")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    results: Dict[str, Any] = {}
    if "curves" in parts:
        print(f"curves ({args.db}): {args.trials} trials x {args.points} training reports + {args.validations} "
              "validations …", flush=True)
        r = results["curves"] = run_curves(args.db, args.trials, args.points, args.validations)
        print(f"  learning curves (GET /experiments/{{id}}/metrics?max_points={r['max_points']}, as the UI page asks): "
              f"first read after storing {r['curves_first_ever_s']:.1f} s; master restarted in "
              f"{r['restart_s']:.1f} s; first read after the restart {r['curves_cold_s']:.2f} s, then {r['curves_warm_s'] * 1000:.0f} ms (median of 5); "
              f"{r['wire_bytes'] / 1e6:.2f} MB sent gzipped ({r['bytes'] / 1e6:.2f} MB of JSON), {r['kept_training_points']:,} of "
              f"{r['trials'] * r['points']:,} training points\n"
              f"  after 32 trials reported again: {r['curves_after_32_reports_s'] * 1000:.0f} ms\n"
              f"  LIVE CURVES ({args.db}, {r['trials']} trials x {r['points']} reports): first read after storing "
              f"{r['curves_first_ever_s']:.2f} s; read after 32 trials reported again "
              f"{r['curves_after_32_reports_s']:.3f} s\n"
              f"  the page: HTML {r['page_html_s'] * 1000:.0f} ms; "
              + ", ".join(f"{p} {v * 1000:.0f} ms" for p, v in r["page_reads_s"].items()) + "\n"
              f"  det experiment describe: {r['describe_cli_s']:.2f} s as a process (API read "
              f"{r['describe_api_s'] * 1000:.0f} ms)\n"
              f"  one trial's full training series: {r['one_trial_full_s'] * 1000:.0f} ms, "
              f"{r['one_trial_full_bytes'] / 1e6:.2f} MB", flush=True)
    if "ticks" in parts:
        print(f"ticks ({args.db}): random search of {args.search_trials} simulated trials on {args.slots} slots …",
              flush=True)
        r = results["ticks"] = run_ticks(args.db, args.search_trials, args.slots, args.ticks_limit)
        print(f"  {r['trials_created']} trials created, experiment {r['state']} after {r['elapsed_s']:.0f} s; "
              f"{r['ticks']} ticks: p50 {r['tick_p50_ms']:.1f} ms, p95 {r['tick_p95_ms']:.1f} ms, max "
              f"{r['tick_max_ms']:.1f} ms; last fifth of the run p50 {r['tick_p50_last_fifth_ms']:.1f} ms, p95 "
              f"{r['tick_p95_last_fifth_ms']:.1f} ms\n"
              f"  ticks that recorded no ended run ({r['quiet_ticks']}): p50 {r['quiet_tick_p50_ms']:.1f} ms, p95 "
              f"{r['quiet_tick_p95_ms']:.1f} ms; recording an ended run (its searcher events, the next trial's "
              f"start) costs {r['tick_ms_per_ended_run']:.1f} ms of tick", flush=True)
    if "ingest" in parts:
        import master_load

        results["ingest"] = []
        for database in ("postgres", "sqlite"):
            print(f"ingest ({database}): 32 trials reporting 100 batch metrics per report for "
                  f"{args.ingest_duration:.0f} s …", flush=True)
            r = master_load.run(database, args.ingest_duration, 32, 100)
            results["ingest"].append(r)
            print(f"  {r['rows_per_s']:,.0f} metric rows/s ({r['reports_per_s']:,.1f} reports/s), p99 "
                  f"{r['p99_ms']:.0f} ms, rows lost {r['rows_lost']}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
