"""Reading a Determined 0.20-0.38 master's PostgreSQL database: the tables and columns docs/import.md lists.

Only the columns named here are read (a column added by a later release is ignored; one that an older release
lacks reads as NULL), through plain SELECTs on a read-only transaction. Rows come out as the JSON the import routes
take (determined/master/api/schemas/imports.py): times as ISO text, bytes as base64.
"""
import base64
import datetime
import hashlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from determined import errors

# Metric tables: one per partition in 0.23+ (partitions of `metrics`), two standalone tables before.
METRIC_TABLES = (("raw_steps", "TRAINING"), ("raw_validations", "VALIDATION"), ("generic_metrics", "GENERIC"))
_REQUIRED = ("users", "experiments", "trials", "workspaces", "projects", "raw_steps", "raw_validations")


class SourceError(errors.DeterminedError):
    """The source cannot be read: the message says why and what to do."""


def _iso(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return str(value.isoformat())


class Source:
    """A Determined master's database, opened read-only."""

    def __init__(self, url: str) -> None:
        import psycopg

        try:
            self.conn = psycopg.connect(url, connect_timeout=10)
        except psycopg.Error as e:
            raise SourceError(f"cannot connect to the source database: {str(e).strip()}") from None
        # times written as text by the source (metric rows) are in UTC: its session's time zone, set once
        self.conn.execute("SET TIME ZONE 'UTC'")
        self.conn.commit()
        self.conn.read_only = True
        self._columns: Dict[str, List[str]] = {}
        for table, column in self.conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"):
            self._columns.setdefault(table, []).append(column)
        self.conn.rollback()
        missing = [t for t in _REQUIRED if t not in self._columns]
        if missing:
            raise SourceError("the source is not a Determined 0.20-0.38 master's database: it has no table "
                              + ", ".join(missing))
        self.generation = ("0.29-0.38 (runs, trials_v2)" if "runs" in self._columns else
                           "0.23-0.28 (partitioned metrics)" if "generic_metrics" in self._columns else
                           "0.20-0.22")
        self.cluster_id = self._cluster_id(url)
        self._tasks: Optional[Dict[str, int]] = None

    def close(self) -> None:
        self.conn.close()

    def _cluster_id(self, url: str) -> str:
        if "cluster_id" in self._columns:
            row = self.conn.execute("SELECT cluster_id FROM cluster_id LIMIT 1").fetchone()
            self.conn.rollback()
            if row and row[0]:
                return str(row[0])[:128]
        return "db-" + hashlib.sha1(url.encode()).hexdigest()[:16]

    def has(self, table: str, column: Optional[str] = None) -> bool:
        return table in self._columns and (column is None or column in self._columns[table])

    def _col(self, table: str, column: str, alias: Optional[str] = None, cast: str = "") -> str:
        """`column` of `table` when it has it, else NULL (named `alias`)."""
        name = alias or column
        return f'"{column}"{cast} AS "{name}"' if self.has(table, column) else f'NULL AS "{name}"'

    def count(self, table: str, where: str = "", params: Sequence[Any] = ()) -> int:
        if not self.has(table):
            return 0
        row = self.conn.execute(f'SELECT count(*) FROM "{table}" {where}', params).fetchone()
        self.conn.rollback()
        return int(row[0]) if row else 0

    def _stream(self, sql: str, params: Sequence[Any] = (), size: int = 5000) -> Iterator[List[Tuple[Any, ...]]]:
        """The query's rows in lists of up to `size`, through a server-side cursor."""
        with self.conn.transaction():
            with self.conn.cursor(name="det_import") as cursor:
                cursor.itersize = size
                cursor.execute(sql, params)
                while True:
                    rows = cursor.fetchmany(size)
                    if not rows:
                        break
                    yield rows

    # ------------------------------------------------------------ rows per kind

    def users(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        sql = (f'SELECT id, username, {self._col("users", "admin")}, {self._col("users", "active")} '
               "FROM users ORDER BY id")
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "username": r[1], "admin": bool(r[2]), "active": r[3] is not False} for r in rows]

    def workspaces(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        t = "workspaces"
        sql = (f'SELECT id, name, {self._col(t, "archived")}, {self._col(t, "immutable")}, '
               f'{self._col(t, "user_id")}, {self._col(t, "created_at")} FROM workspaces ORDER BY id')
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "name": r[1], "archived": bool(r[2]), "immutable": bool(r[3]), "owner_id": r[4],
                    "created_at": _iso(r[5])} for r in rows]

    def projects(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        t = "projects"
        sql = (f'SELECT id, {self._col(t, "workspace_id")}, name, {self._col(t, "description")}, '
               f'{self._col(t, "notes")}, {self._col(t, "archived")}, {self._col(t, "immutable")}, '
               f'{self._col(t, "user_id")}, {self._col(t, "created_at")} FROM projects ORDER BY id')
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "workspace_id": r[1], "name": r[2], "description": r[3], "notes": r[4],
                    "archived": bool(r[5]), "immutable": bool(r[6]), "owner_id": r[7], "created_at": _iso(r[8])}
                   for r in rows]

    def experiments(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        t = "experiments"
        sql = (f'SELECT id, state::text, config, {self._col(t, "model_definition")}, {self._col(t, "notes")}, '
               f'{self._col(t, "owner_id")}, {self._col(t, "project_id")}, {self._col(t, "archived")}, '
               f'{self._col(t, "progress")}, start_time, end_time FROM experiments ORDER BY id')
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "state": r[1], "config": r[2] if isinstance(r[2], dict) else {},
                    "model_definition": base64.b64encode(bytes(r[3])).decode() if r[3] is not None else None,
                    "notes": r[4], "owner_id": r[5], "project_id": r[6], "archived": bool(r[7]), "progress": r[8],
                    "start_time": _iso(r[9]), "end_time": _iso(r[10])} for r in rows]

    def trials(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        # `trials` is a table up to 0.28 and a view over runs and trials_v2 from 0.29: the same columns
        t = "trials"
        sql = (f'SELECT id, experiment_id, state::text, hparams, {self._col(t, "seed")}, '
               f'{self._col(t, "request_id")}, {self._col(t, "restarts")}, start_time, end_time '
               "FROM trials ORDER BY id")
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "experiment_id": r[1], "state": r[2], "hparams": r[3] if isinstance(r[3], dict)
                    else {}, "seed": r[4], "request_id": r[5], "restarts": r[6], "start_time": _iso(r[7]),
                    "end_time": _iso(r[8])} for r in rows]

    def task_trials(self) -> Dict[str, int]:
        """task id -> trial id: trials.task_id (0.20-0.22), trial_id_task_id (0.23-0.28), run_id_task_id (0.29+)."""
        if self._tasks is None:
            tasks: Dict[str, int] = {}
            if self.has("run_id_task_id"):
                sql = "SELECT task_id, run_id FROM run_id_task_id"
            elif self.has("trial_id_task_id"):
                sql = "SELECT task_id, trial_id FROM trial_id_task_id"
            elif self.has("trials", "task_id"):
                sql = "SELECT task_id, id FROM trials WHERE task_id IS NOT NULL"
            else:
                sql = ""
            if sql:
                for rows in self._stream(sql, size=50000):
                    tasks.update({str(task): int(trial) for task, trial in rows})
            self._tasks = tasks
        return self._tasks

    def metric_tables(self) -> List[Tuple[str, str]]:
        return [(table, partition) for table, partition in METRIC_TABLES if self.has(table)]

    def metrics(self, table: str, partition: str, after: int, size: int) -> Iterator[List[Tuple[Any, ...]]]:
        """Batches of the table's metric rows after source id `after`, each row the cells of the metric route
        (METRIC_COLUMNS): id, trial_id, group (GENERIC rows), total_batches, end_time (ISO text, UTC), metrics (JSON
        text of an object), batch_metrics (JSON text of a list, TRAINING rows), archived.

        The source PostgreSQL cuts each row's `metrics` jsonb into these cells and writes them as text: the client
        neither parses nor encodes a metric (at a million rows, json.loads of every row was most of its time)."""
        key = "validation_metrics" if partition == "VALIDATION" else "avg_metrics"
        group = "NULL"
        if partition == "GENERIC":
            group = "COALESCE(NULLIF(metric_group, ''), 'generic')" if self.has(table, "metric_group") else "'generic'"
        # `key`'s object when the row has one, else the row's object less Determined's own keys
        own = "m - 'avg_metrics' - 'batch_metrics' - 'validation_metrics' - 'num_inputs'"
        chosen = (f"CASE WHEN jsonb_typeof(m->'{key}') = 'object' THEN m->'{key}' "
                  f"WHEN jsonb_typeof(m) = 'object' THEN {own} ELSE '{{}}'::jsonb END")
        epochs = "total_epochs" if self.has(table, "total_epochs") else "NULL::real"
        archived = "COALESCE(archived, false)" if self.has(table, "archived") else "false"
        batch = ("CASE WHEN jsonb_typeof(m->'batch_metrics') = 'array' THEN (m->'batch_metrics')::text END"
                 if partition == "TRAINING" else "NULL")
        sql = (f"SELECT id, trial_id, grp, total_batches, end_time, "
               # 0.20's total_epochs column becomes the metric `epochs` when the row has none
               f"(CASE WHEN epochs IS NOT NULL AND epochs <> 0 AND NOT chosen ? 'epochs' "
               f"THEN chosen || jsonb_build_object('epochs', epochs) ELSE chosen END)::text, batch, archived "
               f"FROM (SELECT id, trial_id, {group} AS grp, total_batches, "
               f"""to_char(end_time, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS end_time, {chosen} AS chosen, """
               f"{epochs} AS epochs, {batch} AS batch, {archived} AS archived "
               f'FROM (SELECT *, metrics::jsonb AS m FROM "{table}" WHERE id > %s) AS rows) AS cells ORDER BY id')
        yield from self._stream(sql, (after,), size=size)

    def checkpoints(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        tasks = self.task_trials()
        if self.has("checkpoints_v2"):
            sql = ("SELECT uuid::text, task_id, state::text, report_time, resources, metadata "
                   "FROM checkpoints_v2 ORDER BY id")
            for rows in self._stream(sql, size=size):
                out = []
                for r in rows:
                    meta = r[5] if isinstance(r[5], dict) else {}
                    steps = meta.get("steps_completed")
                    out.append({"uuid": r[0], "task_id": r[1], "trial_id": tasks.get(str(r[1])), "state": r[2],
                                "report_time": _iso(r[3]), "resources": r[4] if isinstance(r[4], dict) else {},
                                "metadata": meta, "steps_completed": steps if isinstance(steps, int) else None})
                yield out
        if self.has("raw_checkpoints"):  # checkpoints of the releases before 0.17, still kept by 0.20-0.28
            t = "raw_checkpoints"
            sql = (f'SELECT uuid::text, trial_id, state::text, end_time, resources, metadata, '
                   f'{self._col(t, "format")}, {self._col(t, "framework")}, {self._col(t, "determined_version")}, '
                   f'total_batches FROM raw_checkpoints WHERE uuid IS NOT NULL ORDER BY id')
            for rows in self._stream(sql, size=size):
                yield [{"uuid": r[0], "trial_id": r[1], "state": r[2], "report_time": _iso(r[3]),
                        "resources": r[4] if isinstance(r[4], dict) else {},
                        "metadata": r[5] if isinstance(r[5], dict) else {}, "format": r[6], "framework": r[7],
                        "determined_version": r[8], "steps_completed": r[9]} for r in rows]

    def checkpoint_count(self) -> int:
        return self.count("checkpoints_v2") + self.count("raw_checkpoints", "WHERE uuid IS NOT NULL")

    def models(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        t = "models"
        if not self.has(t):
            return
        sql = (f'SELECT id, name, {self._col(t, "description")}, {self._col(t, "metadata")}, '
               f'{self._col(t, "labels")}, {self._col(t, "notes")}, {self._col(t, "archived")}, '
               f'{self._col(t, "user_id")}, {self._col(t, "workspace_id")}, {self._col(t, "creation_time")}, '
               f'{self._col(t, "last_updated_time")} FROM models ORDER BY id')
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "name": r[1], "description": r[2], "metadata": r[3] if isinstance(r[3], dict) else {},
                    "labels": [str(x) for x in (r[4] or [])], "notes": r[5], "archived": bool(r[6]),
                    "owner_id": r[7], "workspace_id": r[8], "creation_time": _iso(r[9]),
                    "last_updated_time": _iso(r[10])} for r in rows]

    def model_versions(self, size: int) -> Iterator[List[Dict[str, Any]]]:
        t = "model_versions"
        if not self.has(t):
            return
        sql = (f'SELECT id, model_id, version, checkpoint_uuid::text, {self._col(t, "name")}, '
               f'{self._col(t, "comment")}, {self._col(t, "notes")}, {self._col(t, "metadata")}, '
               f'{self._col(t, "labels")}, {self._col(t, "creation_time")} FROM model_versions ORDER BY id')
        for rows in self._stream(sql, size=size):
            yield [{"id": r[0], "model_id": r[1], "version": r[2], "checkpoint_uuid": r[3], "name": r[4],
                    "comment": r[5], "notes": r[6], "metadata": r[7] if isinstance(r[7], dict) else {},
                    "labels": [str(x) for x in (r[8] or [])], "creation_time": _iso(r[9])} for r in rows]

    def logs(self, after: int, size: int) -> Iterator[Tuple[List[Dict[str, Any]], Dict[str, int]]]:
        """Batches of trial log lines after source id `after`, and per batch the lines of tasks that are no trial's."""
        tasks = self.task_trials()
        sql = (f'SELECT id, task_id, timestamp, {self._col("task_logs", "stdtype")}, log FROM task_logs '
               "WHERE id > %s ORDER BY id")
        for rows in self._stream(sql, (after,), size=size):
            out, others = [], {}
            for r in rows:
                trial = tasks.get(str(r[1]))
                if trial is None:
                    others[str(r[1])] = others.get(str(r[1]), 0) + 1
                    continue
                text = bytes(r[4]).decode("utf-8", "replace") if isinstance(r[4], (bytes, memoryview)) else str(r[4])
                # Determined keeps each line with its line ending (its CLI prints them with end=""); here a message
                # is the line without it
                text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
                out.append({"id": r[0], "trial_id": trial, "timestamp": _iso(r[2]),
                            "stream": r[3] if r[3] in ("stdout", "stderr") else "stdout", "message": text})
            yield out, others
