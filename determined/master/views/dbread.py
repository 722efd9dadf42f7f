"""Reading the master's database with portable SQL, through SQLAlchemy (the master) or sqlite3 (the CLI).

The read routes (determined/master/views/reads.py) and the JSON shapes (serialize.py) are written once against
`Reader`: `SessionReader` runs them inside the master's SQLAlchemy session, `SqliteReader` on a read-only
sqlite3 connection to a data dir's database, so that `det experiment list` on the embedded master reads
without starting the server stack (no SQLAlchemy, FastAPI or migrations to import). The SQL is plain SELECTs
that SQLite and PostgreSQL both run; values come back decoded the same way from both drivers.
"""
import abc
import datetime
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# Columns by how their raw driver value is decoded (JSON is text on SQLite; times are text there).
_JSON = frozenset({"config", "searcher_snapshot", "hparams", "latest_validation", "metrics", "batch_metrics",
                   "resources", "metadata", "event", "operations", "log_policy_matches",
                   "project_notes", "labels"})
_TIME = frozenset({"start_time", "end_time", "timestamp", "time", "creation_time", "last_updated_time",
                   "created_at", "expires_at"})
_BOOL = frozenset({"archived", "searcher_shutdown", "searcher_failure", "checkpoint_gc_done", "preempt_requested",
                   "close_requested", "completed", "admin", "active", "revoked", "immutable", "unmanaged"})

# The columns each read selects (never `*`: an experiment row holds its model definition archive).
EXPERIMENT_COLUMNS = ("id, state, config, owner, archived, searcher_snapshot, searcher_shutdown, searcher_failure, "
                      "progress, best_validation, best_trial_id, start_time, end_time, project_id, notes, unmanaged, "
                      "external_experiment_id")
TRIAL_COLUMNS = ("id, experiment_id, request_id, hparams, seed, state, restarts, total_batches, runs, allocation_id, "
                 "preempt_requested, close_requested, early_exit_reason, warm_start_checkpoint_uuid, "
                 "latest_checkpoint_uuid, best_validation, latest_validation, start_time, end_time, log_policy_matches, "
                 "runner_status, external_trial_id")
CHECKPOINT_COLUMNS = ("id, uuid, experiment_id, trial_id, state, steps_completed, resources, framework, format, "
                      "metadata, determined_version, start_time, end_time")
MODEL_COLUMNS = ("id, name, description, metadata, creation_time, last_updated_time, owner, workspace_id, labels, "
                 "archived")


class Row:
    """A row as attributes, named like the ORM models' (the `metadata` column is also `metadata_`)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)
        if "metadata" in values:
            self.__dict__["metadata_"] = values["metadata"]

    def __repr__(self) -> str:
        return f"Row({self.__dict__!r})"


def _time(value: Any) -> Optional[datetime.datetime]:
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value))


class Reader(abc.ABC):
    """Runs SELECTs with `:name` parameters; subclasses give `_execute` (raw rows) and say whether JSON is text.

    `memo` keeps rows that one answer reads many times (an experiment's config for each of its checkpoints).
    """

    json_is_text = True

    def __init__(self) -> None:
        self.memo: Dict[Any, Any] = {}

    def remembered(self, key: Any, sql: str, **params: Any) -> Optional[Row]:
        """`first(sql)`, read once per key while this reader lives."""
        if key not in self.memo:
            self.memo[key] = self.first(sql, **params)
        return self.memo[key]

    @abc.abstractmethod
    def _execute(self, sql: str, params: Mapping[str, Any]) -> Tuple[List[str], Iterable[Sequence[Any]]]:
        """Column names and raw rows of a SELECT."""

    def _decode(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if name in _JSON and self.json_is_text and isinstance(value, (str, bytes)):
            return json.loads(value)
        if name in _TIME:
            return _time(value)
        if name in _BOOL:
            return bool(value)
        return value

    def rows(self, sql: str, **params: Any) -> List[Row]:
        names, raw = self._execute(sql, params)
        return [Row({n: self._decode(n, v) for n, v in zip(names, r)}) for r in raw]

    def first(self, sql: str, **params: Any) -> Optional[Row]:
        rows = self.rows(sql, **params)
        return rows[0] if rows else None

    def scalar(self, sql: str, **params: Any) -> Any:
        _, raw = self._execute(sql, params)
        for r in raw:
            return r[0]
        return None


def in_list(prefix: str, values: Sequence[Any]) -> Tuple[str, Dict[str, Any]]:
    """`(:p0, :p1, ...)` and its parameters, for `... IN <that>` (neither driver binds a list to one name)."""
    params = {f"{prefix}{i}": v for i, v in enumerate(values)}
    return "(" + ", ".join(f":{name}" for name in params) + ")" if params else "(NULL)", params


class SessionReader(Reader):
    """A Reader in the master's SQLAlchemy session (its transaction, its connection)."""

    def __init__(self, session: Any) -> None:
        super().__init__()
        self.session = session
        self.json_is_text = session.get_bind().dialect.name == "sqlite"

    def _execute(self, sql: str, params: Mapping[str, Any]) -> Tuple[List[str], Iterable[Sequence[Any]]]:
        from sqlalchemy import text

        if self.session.new or self.session.dirty or self.session.deleted:
            self.session.flush()  # the SQL must see what the transaction changed
            self.memo.clear()
        result = self.session.execute(text(sql), dict(params))
        return list(result.keys()), result.fetchall()


class SqliteReader(Reader):
    """A Reader on a sqlite3 connection (the CLI's reads of a data dir no master runs on)."""

    def __init__(self, connection: Any) -> None:
        super().__init__()
        self.connection = connection

    def _execute(self, sql: str, params: Mapping[str, Any]) -> Tuple[List[str], Iterable[Sequence[Any]]]:
        cursor = self.connection.execute(sql, dict(params))
        return [d[0] for d in cursor.description or ()], cursor.fetchall()


def reader_of(db: Any) -> Reader:
    """`db` as a Reader: a Reader as is, a SQLAlchemy session wrapped (one Reader per session)."""
    if isinstance(db, Reader):
        return db
    reader = db.info.get("determined_reader")
    if reader is None:
        reader = db.info["determined_reader"] = SessionReader(db)
    return reader
