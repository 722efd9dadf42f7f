"""`det import determined`'s metric rows on PostgreSQL: 1,000,000 rows of a synthetic Determined 0.38 database
imported into a master on PostgreSQL (the client reads the source in batches, the import route COPYs them), against a
baseline measured in the same run: the same rows COPYed straight into the target's table, no client, no HTTP.

    .venv/bin/python benchmarks/import_determined.py [--rows 1000000]
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tests import _postgres  # noqa: E402
from tests.importer import _source_db  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=None, help="metric rows per request (default: the CLI's)")
    args = parser.parse_args()
    server = _postgres.PostgresServer(durable=True).start()
    try:
        src = server.create_database("det_source")
        storage = {"type": "shared_fs", "host_path": tempfile.mkdtemp()}
        _source_db.build(src, "0.38", [storage, storage], metric_rows=args.rows)
        target = server.create_database("det_target")
        os.environ["DET_DATA_DIR"] = tempfile.mkdtemp()
        os.environ["DET_DB_URL"] = target

        from determined.experimental import _connect
        from determined.experimental.determined_import import Source, run_import

        session = _connect.Connection(None, user="admin", local_reads=False).session
        source = Source(src)
        times = {}

        cpu = {}

        def progress(kind: str, done: int, total: int) -> None:
            times.setdefault(kind, time.perf_counter())
            times[kind + ":end"] = time.perf_counter()
            cpu.setdefault(kind, time.process_time())
            cpu[kind + ":end"] = time.process_time()

        start = time.perf_counter()
        summary = run_import(session, source, progress=progress,
                             batch={"metrics": args.batch} if args.batch else None)
        total = time.perf_counter() - start
        metrics = summary.counts["metrics"]
        m_time = times["metrics:end"] - times["metrics"]
        m_cpu = cpu["metrics:end"] - cpu["metrics"]
        print(f"import: {metrics.imported:,} metric rows in {m_time:.1f} s = {metrics.imported / m_time:,.0f} rows/s "
              f"(whole import {total:.1f} s; load average {os.getloadavg()[0]:.1f})")
        # less sensitive to a shared machine's load than the wall time: the CPU of this process (the client, its
        # read-ahead thread and the in-process master), not the PostgreSQL servers'
        print(f"import: this process's CPU {m_cpu:.1f} s = {metrics.imported / m_cpu:,.0f} rows per CPU second")

        # baseline: the same rows COPYed straight into a table shaped like the target's, no client and no HTTP
        import psycopg

        with psycopg.connect(src) as s_conn:
            rows = s_conn.execute("SELECT trial_id, total_batches, metrics, end_time FROM metrics").fetchall()
        base_db = server.create_database("det_baseline")
        with psycopg.connect(base_db) as b_conn:
            b_conn.execute("CREATE TABLE training_metrics (id serial PRIMARY KEY, trial_id integer, steps_completed "
                           "integer, metrics json, batch_metrics json, end_time timestamp)")
            t0 = time.perf_counter()
            with b_conn.cursor().copy("COPY training_metrics (trial_id, steps_completed, metrics, batch_metrics, "
                                      "end_time) FROM STDIN") as copy:
                for trial, steps, m, end in rows:
                    copy.write_row((trial, steps, json.dumps(m.get("avg_metrics") or m.get("validation_metrics")),
                                    json.dumps(m.get("batch_metrics")), end))
            b_conn.commit()
            base = time.perf_counter() - t0
        print(f"baseline: {len(rows):,} rows COPYed in {base:.1f} s = {len(rows) / base:,.0f} rows/s")
        print(f"import / baseline: {base / m_time:.2f}")
        source.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
