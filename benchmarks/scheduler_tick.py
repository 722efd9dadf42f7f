"""The scheduler's tick with 10,000 queued trials across 3 resource pools and 20 priorities (issue 32's target:
p50 <= 30 ms), against a baseline measured in the same run: the same trials in 1 pool at 1 priority.

Each case is a database (SQLite, as `det master up` makes it, or --db postgres) holding --experiments active
experiments (default 60) whose --trials queued trials (default 10,000, each with an operation to do) wait for a
slot, and --running trials per pool that hold slots (the lowest priorities, so that preemption has candidates).
The pools: 3 pools of 8 slots of their own, scheduler `priority` with `preemption: true`; the experiments
spread over them round-robin, at 20 priorities (1, 6, ..., 96). The baseline: one pool of 24 slots, every
experiment at priority 42.

A tick is what the master's scheduler thread asks of the database when slots are free (master.py `_schedule`):
`has_waiting_work`; `pick_trials` on the free slots (2 per pool); `preemption_victims` once those slots are
taken (the first queued job does not fit: it looks for lower-priority trials to preempt); `idle_trials`.
On PostgreSQL the databases are analyzed once built (a live master's autovacuum does it within a minute of as
many inserts). Each tick runs in its own transaction, rolled back (nothing changes between ticks); the two cases
alternate tick by tick, so that the machine's load drifts over both alike. Printed: p50 and p95 per case, the
ratio of the p50s, the time per part of the tick, and the load average.

    .venv/bin/python benchmarks/scheduler_tick.py
    .venv/bin/python benchmarks/scheduler_tick.py --ticks 200 --db postgres
"""
import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sqlalchemy import insert, select, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from determined.master.db import default_db_url, make_engine, upgrade  # noqa: E402
from determined.master.db.models import Experiment, SearcherOperation, Trial  # noqa: E402
from determined.master.lifecycle import states  # noqa: E402
from determined.master.scheduling import pools, scheduler  # noqa: E402

POOL_SLOTS = 8
POOL_NAMES = ("gpus-a", "gpus-b", "cpus")
PRIORITIES = tuple(range(1, 100, 5))  # 20 priorities: 1, 6, ..., 96


def cluster_of(spread: bool) -> pools.ClusterPools:
    scheduler_config = {"type": "priority", "preemption": True}
    if not spread:
        return pools.parse({"scheduler": scheduler_config},
                           [{"pool_name": "default", "slots": list(range(POOL_SLOTS * len(POOL_NAMES)))}])
    return pools.parse({"scheduler": scheduler_config, "default_compute_resource_pool": POOL_NAMES[0]},
                       [{"pool_name": name, "slots": list(range(i * POOL_SLOTS, (i + 1) * POOL_SLOTS))}
                        for i, name in enumerate(POOL_NAMES)])


def build(db_url: str, spread: bool, experiments: int, trials: int, running_per_pool: int) -> Any:
    """A database with the case's experiments and trials; returns its engine."""
    engine = make_engine(db_url)
    upgrade(engine)
    pool_names = POOL_NAMES if spread else ("default",)
    exp_rows: List[Dict[str, Any]] = []
    for i in range(experiments):
        priority = PRIORITIES[i % len(PRIORITIES)] if spread else 42
        exp_rows.append({"id": i + 1, "state": states.ACTIVE, "model_def": b"",
                         "config": {"resources": {"priority": priority, "slots_per_trial": 1,
                                                  "resource_pool": pool_names[i % len(pool_names)]},
                                    "searcher": {"name": "random", "max_length": {"batches": 10}}}})
    # The running trials belong to the lowest-priority experiments of each pool (the preemption candidates).
    by_pool: Dict[str, List[Dict[str, Any]]] = {}
    for row in sorted(exp_rows, key=lambda r: -r["config"]["resources"]["priority"]):
        by_pool.setdefault(row["config"]["resources"]["resource_pool"], []).append(row)
    running_slots = running_per_pool * len(POOL_NAMES) // len(pool_names)
    trial_rows: List[Dict[str, Any]] = []
    op_rows: List[Dict[str, Any]] = []
    trial_id = 0
    for pool_rows in by_pool.values():
        for k in range(running_slots):
            trial_id += 1
            exp_id = pool_rows[k % 3]["id"]
            trial_rows.append({"id": trial_id, "experiment_id": exp_id, "request_id": f"r{trial_id}", "hparams": {},
                               "seed": trial_id, "state": states.ACTIVE, "allocation_id": f"alloc-{trial_id}"})
            op_rows.append({"trial_id": trial_id, "length": 10, "length_batches": 10, "completed": False})
    for k in range(trials):
        trial_id += 1
        exp_id = exp_rows[k % experiments]["id"]
        trial_rows.append({"id": trial_id, "experiment_id": exp_id, "request_id": f"r{trial_id}", "hparams": {},
                           "seed": trial_id, "state": states.ACTIVE, "allocation_id": None})
        op_rows.append({"trial_id": trial_id, "length": 10, "length_batches": 10, "completed": False})
    with Session(engine) as s, s.begin():
        s.execute(insert(Experiment), exp_rows)
        s.execute(insert(Trial), trial_rows)
        s.execute(insert(SearcherOperation), op_rows)
    if engine.dialect.name == "postgresql":
        # A live master's PostgreSQL has statistics: autovacuum analyzes a table within a minute of this many
        # inserts. Without them the planner guesses, and walks all 10,000 trials where an index finds the few.
        with engine.connect() as conn:
            conn.execute(text("ANALYZE"))
            conn.commit()
    return engine


class Case:
    def __init__(self, label: str, engine: Any, cluster: pools.ClusterPools) -> None:
        self.label, self.engine, self.cluster = label, engine, cluster
        capacity = cluster.slot_ids(POOL_SLOTS * len(POOL_NAMES))
        self.capacity = {name: len(ids) for name, ids in capacity.items()}
        with Session(engine) as s:
            running = s.execute(select(Trial.experiment_id).where(Trial.allocation_id.is_not(None))).scalars().all()
            pool_of = {e.id: e.config["resources"]["resource_pool"] for e in s.scalars(select(Experiment))}
        self.free = dict(self.capacity)
        for exp_id in running:
            self.free[pool_of[exp_id]] -= 1
        self.ticks: List[float] = []
        self.parts: Dict[str, List[float]] = {}
        self.picked = self.victims = 0

    def tick(self) -> None:
        marks: List[Tuple[str, float]] = []

        def mark(name: str) -> None:
            marks.append((name, time.perf_counter()))

        t0 = time.perf_counter()
        with Session(self.engine, info={pools.POOLS_INFO: self.cluster}) as s:
            scheduler.has_waiting_work(s)
            mark("has_waiting_work")
            picked = scheduler.pick_trials(s, self.free)
            mark("pick_trials")
            taken = {name: 0 for name in self.free}  # the picked trials now hold the free slots
            victims = scheduler.preemption_victims(s, taken, self.capacity)
            mark("preemption_victims")
            scheduler.idle_trials(s)
            mark("idle_trials")
            s.rollback()
        self.ticks.append(time.perf_counter() - t0)
        previous = t0
        for name, at in marks:
            self.parts.setdefault(name, []).append(at - previous)
            previous = at
        self.picked, self.victims = len(picked), len(victims)


def p(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10000, help="queued trials (default 10000)")
    parser.add_argument("--experiments", type=int, default=60, help="active experiments (default 60)")
    parser.add_argument("--running", type=int, default=6, help="running trials per pool of 8 slots (default 6)")
    parser.add_argument("--ticks", type=int, default=100, help="ticks timed per case (default 100)")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    pg: Any = None
    engines: List[Any] = []
    try:
        with tempfile.TemporaryDirectory(prefix="det-tick-") as tmp:
            urls: List[str] = []
            if args.db == "postgres":
                from tests._postgres import PostgresServer

                pg = PostgresServer().start()
                urls = [pg.create_database("det_tick_pools"), pg.create_database("det_tick_base")]
            else:
                for name in ("pools", "base"):
                    (pathlib.Path(tmp) / name).mkdir()
                    urls.append(default_db_url(pathlib.Path(tmp) / name))
            print(f"scheduler tick ({args.db}): {args.trials} queued trials of {args.experiments} experiments, "
                  f"{args.running} running per 8-slot pool; {args.ticks} ticks per case …", flush=True)
            cases = []
            for url, spread, label in ((urls[0], True, "3 pools x 20 priorities"),
                                       (urls[1], False, "1 pool x 1 priority (baseline)")):
                engine = build(url, spread, args.experiments, args.trials, args.running)
                engines.append(engine)
                cases.append(Case(label, engine, cluster_of(spread)))
            for case in cases:  # warm-up: the first read of each database
                case.tick()
                case.ticks.clear()
                case.parts.clear()
            loads: List[float] = []
            for i in range(args.ticks):
                for case in cases if i % 2 == 0 else reversed(cases):
                    case.tick()
                if i % 10 == 0:
                    loads.append(os.getloadavg()[0])
            for case in cases:
                parts = ", ".join(f"{name} {1000 * statistics.median(v):.1f}" for name, v in case.parts.items())
                print(f"  {case.label}: p50 {1000 * p(case.ticks, 0.5):.1f} ms, p95 {1000 * p(case.ticks, 0.95):.1f} ms "
                      f"(picks {case.picked}, preemption victims {case.victims}; p50 per part, ms: {parts})")
            ratio = p(cases[0].ticks, 0.5) / p(cases[1].ticks, 0.5)
            target = 1000 * p(cases[0].ticks, 0.5) <= 30.0
            print(f"  ratio of the p50s (pools and priorities / baseline): {ratio:.2f}; target p50 <= 30 ms: "
                  f"{'met' if target else 'MISSED'}; load average {statistics.mean(loads):.1f} "
                  f"({os.cpu_count()} cores)", flush=True)
            for engine in engines:
                engine.dispose()
            engines.clear()
            return 0 if target else 1
    finally:
        for engine in engines:
            engine.dispose()
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    sys.exit(main())
