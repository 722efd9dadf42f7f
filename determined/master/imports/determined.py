"""Writing a batch of rows read from a Determined master's database (`det import determined`, docs/import.md).

Every `import_<kind>` takes the open write session, the source cluster's id, the batch's rows (plain dicts, already
checked by the route's models) and `dry_run`, and answers a `Result`: rows imported, rows already there (from an
earlier run, or merged with an equal row here: a user of the same name, the default workspace), and rows skipped
with the reason. Nothing is dropped silently.

* Ids are kept where they are free here, else a new one is taken; db.ImportMapping records old id -> new id for
  every row (and a skipped row with its reason), which is how later kinds find their references (an experiment's
  owner and project, a checkpoint's trial) and how a re-run skips what is done.
* Metric and log rows are too many to record one by one: the client sends each source table in id order, and a
  watermark per table (kind `watermark`) says up to which source id it is imported; a row at or below it is there.
* Imported experiments never run: the search method's state stays behind (`searcher_shutdown`), an experiment
  that was not finished becomes CANCELED with a note that says so, and checkpoint GC is marked done (the files in
  the old cluster's storage are pointed at, never deleted by this master's GC).
* Users get no password (a hash no password matches): an admin gives them one (`det user change-password`).
"""
import base64
import binascii
import dataclasses
import datetime
import json
import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Type

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from determined.master.db.models import (Base, Checkpoint, Experiment, GroupMetrics, ImportMapping, Model,
                                         ModelVersion, Project, TrainingMetrics, Trial, TrialLog, User,
                                         ValidationMetrics, Workspace, utcnow)
from determined.master.insights import curves, kept_curves
from determined.common.checkpoint_order import validation_key
from determined.master.lifecycle import best_validation, states
from determined.master.problems import RequestProblem

NO_PASSWORD = "!imported-without-password"
"""The password hash of an imported user: no password matches it (security/users.check_password) until an admin
sets one. Determined's password hashes are never imported."""

KINDS = ("users", "workspaces", "projects", "experiments", "trials", "metrics", "checkpoints", "models",
         "model_versions", "logs")
WATERMARK = "watermark"

# Determined's experiment and trial states -> the state here and, for a run that had not finished, why it changed.
_FINISHED = {"COMPLETED": "COMPLETED", "CANCELED": "CANCELED", "ERROR": "ERROR"}
_STOPPING = {"STOPPING_COMPLETED": "COMPLETED", "STOPPING_CANCELED": "CANCELED", "STOPPING_ERROR": "ERROR",
             "STOPPING_KILLED": "CANCELED"}
_CHECKPOINT_STATES = {"ACTIVE": "ACTIVE", "COMPLETED": "COMPLETED", "ERROR": "ERROR", "DELETED": "DELETED",
                      "PARTIALLY_DELETED": "DELETED", "UNSPECIFIED": "ERROR"}


@dataclasses.dataclass
class Result:
    imported: int = 0
    already: int = 0
    skipped: List[Dict[str, str]] = dataclasses.field(default_factory=list)

    def skip(self, old_id: Any, reason: str) -> None:
        self.skipped.append({"old_id": str(old_id), "reason": reason})

    def to_json(self) -> Dict[str, Any]:
        return {"imported": self.imported, "already": self.already, "skipped": self.skipped}


def finished_state(state: str) -> Tuple[str, Optional[str]]:
    """The state here of a Determined experiment or trial in `state`, and a note when it had not finished."""
    if state in _FINISHED:
        return _FINISHED[state], None
    if state in _STOPPING:
        return _STOPPING[state], f"it was {state} there; imported as {_STOPPING[state]}"
    return states.CANCELED, (f"it was {state} there; imported as CANCELED: its search method's state cannot be "
                             "carried over, so it cannot continue here")


def _time(value: "datetime.datetime | str | None") -> Optional[datetime.datetime]:
    """A time (with or without an offset; ISO text or as the route's model parsed it) as the naive UTC time the
    database keeps."""
    if not value:
        return None
    parsed = value if isinstance(value, datetime.datetime) else \
        datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        # utcoffset() and a subtraction: astimezone() through pydantic's tzinfo costs ~5 us a row of a metric batch
        offset = parsed.utcoffset()
        parsed = parsed.replace(tzinfo=None)
        if offset:
            parsed -= offset
    return parsed


# ---------------------------------------------------------------- the mapping table

def mapped(s: Session, source: str, kind: str, old_ids: Iterable[Any]) -> Dict[str, Optional[str]]:
    """old id -> new id (None: recorded as skipped) of the rows of `kind` already recorded."""
    keys = sorted({str(i) for i in old_ids})
    found: Dict[str, Optional[str]] = {}
    for start in range(0, len(keys), 5000):
        chunk = keys[start:start + 5000]
        rows = s.execute(select(ImportMapping.old_id, ImportMapping.new_id).where(
            ImportMapping.source == source, ImportMapping.kind == kind, ImportMapping.old_id.in_(chunk)))
        found.update({old: new for old, new in rows})
    return found


def _ids(s: Session, source: str, kind: str, old_ids: Iterable[Any]) -> Dict[str, int]:
    """old id -> new integer id of the imported rows of `kind` (skipped ones left out)."""
    return {old: int(new) for old, new in mapped(s, source, kind, old_ids).items() if new is not None}


def _record(s: Session, source: str, kind: str, old_id: Any, new_id: Any, note: Optional[str] = None) -> None:
    s.add(ImportMapping(source=source, kind=kind, old_id=str(old_id), new_id=None if new_id is None else str(new_id),
                        note=note, created_at=utcnow()))


def watermark(s: Session, source: str, table: str) -> int:
    row = s.get(ImportMapping, (source, WATERMARK, table))
    return int(row.new_id) if row is not None and row.new_id is not None else 0


def _set_watermark(s: Session, source: str, table: str, value: int) -> None:
    row = s.get(ImportMapping, (source, WATERMARK, table))
    if row is None:
        _record(s, source, WATERMARK, table, value)
    elif int(row.new_id or 0) < value:
        row.new_id = str(value)


def progress(s: Session, source: str) -> Dict[str, Any]:
    """What this master holds of `source`: rows recorded per kind, and the watermark of each metric or log table."""
    counts = {kind: int(n) for kind, n in s.execute(
        select(ImportMapping.kind, func.count()).where(ImportMapping.source == source,
                                                       ImportMapping.kind != WATERMARK).group_by(ImportMapping.kind))}
    marks = {old: int(new or 0) for old, new in s.execute(select(ImportMapping.old_id, ImportMapping.new_id).where(
        ImportMapping.source == source, ImportMapping.kind == WATERMARK))}
    return {"source": source, "counts": counts, "watermarks": marks}


def _free(s: Session, model: Type[Base], wanted: Iterable[int]) -> Set[int]:
    """Which of the `wanted` ids of `model`'s table are not taken."""
    ids = sorted(set(wanted))
    taken: Set[int] = set()
    for start in range(0, len(ids), 5000):
        taken.update(s.scalars(select(model.id).where(model.id.in_(ids[start:start + 5000]))))  # type: ignore[attr-defined]
    return set(ids) - taken


def _free_first(rows: List[Mapping[str, Any]], free: Set[int]) -> List[Mapping[str, Any]]:
    """Rows that keep their id first: a row given a new id must not take the id a later row keeps."""
    return [r for r in rows if int(r["id"]) in free] + [r for r in rows if int(r["id"]) not in free]


def _bump_sequence(s: Session, table: str) -> None:
    """After rows with explicit ids, PostgreSQL's sequence of `table` starts after the largest id (SQLite's
    rowids do by themselves)."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                       f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table}), 1))"))


class _Batch:
    """One kind's batch: the rows already recorded, and recording the rest."""

    def __init__(self, s: Session, source: str, kind: str, rows: Sequence[Mapping[str, Any]], key: str = "id",
                 dry_run: bool = False) -> None:
        self.s, self.source, self.kind, self.dry_run = s, source, kind, dry_run
        self.key = key
        self.result = Result()
        self.done = mapped(s, source, kind, (r[key] for r in rows))
        self.explicit_ids = False

    def todo(self, rows: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
        """The rows not yet recorded (the others count as already there); none in a dry run past the check."""
        left, seen = [], set()
        for row in rows:
            key = str(row[self.key])
            if key in self.done:
                self.result.already += 1
            elif key in seen:
                self.result.skip(key, "the same id twice in one batch: the first one is taken")
            else:
                seen.add(key)
                left.append(row)
        return left

    def skip(self, row: Mapping[str, Any], reason: str) -> None:
        self.result.skip(row[self.key], reason)
        if not self.dry_run:
            _record(self.s, self.source, self.kind, row[self.key], None, reason)

    def merged(self, row: Mapping[str, Any], new_id: Any, note: str) -> None:
        """The row is one that this master already has (same name): recorded as that one, counted as already there."""
        self.result.already += 1
        if not self.dry_run:
            _record(self.s, self.source, self.kind, row[self.key], new_id, note)

    def imported(self, row: Mapping[str, Any], new_id: Any) -> None:
        self.result.imported += 1
        if not self.dry_run:
            _record(self.s, self.source, self.kind, row[self.key], new_id)


def _add_with_id(b: _Batch, obj: Any, old_id: int, free: Set[int]) -> int:
    """Add `obj` keeping `old_id` when it is free; its new id."""
    if old_id in free:
        obj.id = old_id
        free.discard(old_id)
        b.explicit_ids = True
    elif b.explicit_ids:  # PostgreSQL's sequence must first pass the ids just kept
        _bump_sequence(b.s, obj.__tablename__)
    b.s.add(obj)
    b.s.flush()
    return int(obj.id)


# ---------------------------------------------------------------- users, workspaces, projects

def import_users(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "users", rows, dry_run=dry_run)
    todo = b.todo(rows)
    existing = {u.username: u for u in s.scalars(select(User).where(User.username.in_([r["username"] for r in todo])))}
    free = _free(s, User, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        if row["username"] in existing:
            b.merged(row, existing[row["username"]].id, "a user of this name is already here: taken as that user")
            continue
        if dry_run:
            b.result.imported += 1
            continue
        user = User(username=row["username"], password_hash=NO_PASSWORD, admin=bool(row["admin"]),
                    active=bool(row["active"]), created_at=utcnow())
        b.imported(row, _add_with_id(b, user, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "users")
    return b.result


def _owner(s: Session, source: str, old_user_id: Optional[int]) -> Tuple[Optional[int], str]:
    """The user here of a source user id: (id, username), (None, "") when it is unknown."""
    if old_user_id is None:
        return None, ""
    new = _ids(s, source, "users", [old_user_id]).get(str(old_user_id))
    user = s.get(User, new) if new is not None else None
    return (user.id, user.username) if user is not None else (None, "")


def import_workspaces(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "workspaces", rows, dry_run=dry_run)
    todo = b.todo(rows)
    existing = {w.name: w for w in s.scalars(select(Workspace).where(Workspace.name.in_([r["name"] for r in todo])))}
    free = _free(s, Workspace, (r["id"] for r in todo if not r.get("immutable")))
    todo = _free_first(todo, free)
    for row in todo:
        if row.get("immutable"):  # Determined's "Uncategorized": this master's default workspace
            b.merged(row, 1, "the default workspace: taken as this master's default workspace")
        elif row["name"] in existing:
            b.merged(row, existing[row["name"]].id, "a workspace of this name is already here: taken as that one")
        elif dry_run:
            b.result.imported += 1
        else:
            owner_id, owner = _owner(s, source, row.get("owner_id"))
            ws = Workspace(name=row["name"], archived=bool(row.get("archived")), immutable=False, owner=owner,
                           owner_id=owner_id, created_at=_time(row.get("created_at")) or utcnow())
            b.imported(row, _add_with_id(b, ws, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "workspaces")
    return b.result


def import_projects(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "projects", rows, dry_run=dry_run)
    todo = b.todo(rows)
    workspaces = _ids(s, source, "workspaces", (r["workspace_id"] for r in todo if r.get("workspace_id") is not None))
    free = _free(s, Project, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        if row.get("immutable"):
            b.merged(row, 1, "the default project: taken as this master's default project")
            continue
        ws = workspaces.get(str(row.get("workspace_id")))
        if ws is None:
            if dry_run:
                b.result.imported += 1
            else:
                b.skip(row, f"its workspace {row.get('workspace_id')} was not imported")
            continue
        same = s.scalars(select(Project).where(Project.workspace_id == ws, Project.name == row["name"])).first()
        if same is not None:
            b.merged(row, same.id, "a project of this name is already in the workspace: taken as that one")
        elif dry_run:
            b.result.imported += 1
        else:
            owner_id, owner = _owner(s, source, row.get("owner_id"))
            project = Project(workspace_id=ws, name=row["name"], description=row.get("description") or "",
                              notes=row.get("notes"), archived=bool(row.get("archived")), immutable=False,
                              owner=owner, owner_id=owner_id, created_at=_time(row.get("created_at")) or utcnow())
            b.imported(row, _add_with_id(b, project, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "projects")
    return b.result


# ---------------------------------------------------------------- experiments and trials

def _note(cluster: str, why: str) -> str:
    return f"Imported from Determined (cluster {cluster}): {why}."


def _config(config: Mapping[str, Any], old_id: int) -> Dict[str, Any]:
    """The experiment's config as Determined stored it, with what this master reads from every experiment's config
    and a Determined config may lack (one written by hand, or by a release that did not expand it):
    `reproducibility.experiment_seed` (the source experiment's id when it has none)."""
    config = dict(config)
    reproducibility = config.get("reproducibility")
    reproducibility = dict(reproducibility) if isinstance(reproducibility, Mapping) else {}
    if not isinstance(reproducibility.get("experiment_seed"), int) or isinstance(
            reproducibility.get("experiment_seed"), bool):
        reproducibility["experiment_seed"] = old_id % 2**31
    config["reproducibility"] = reproducibility
    return config


def import_experiments(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "experiments", rows, dry_run=dry_run)
    todo = b.todo(rows)
    if dry_run:
        b.result.imported += len(todo)
        return b.result
    projects = _ids(s, source, "projects", (r["project_id"] for r in todo if r.get("project_id") is not None))
    free = _free(s, Experiment, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        owner_id, owner = _owner(s, source, row.get("owner_id"))
        if owner_id is None:
            b.skip(row, f"its owner (user {row.get('owner_id')}) was not imported")
            continue
        project = projects.get(str(row.get("project_id"))) if row.get("project_id") is not None else 1
        if project is None:
            b.skip(row, f"its project {row.get('project_id')} was not imported")
            continue
        try:
            model_def = base64.b64decode(row.get("model_definition") or "", validate=True)
        except (binascii.Error, ValueError):
            b.skip(row, "its model definition is not valid base64")
            continue
        state, why = finished_state(str(row["state"]))
        notes = row.get("notes") or ""
        if why:
            notes = (notes + "\n\n" if notes else "") + _note(source, why)
        start = _time(row.get("start_time")) or utcnow()
        exp = Experiment(state=state, config=_config(row["config"], int(row["id"])), model_def=model_def, owner=owner,
                         owner_id=owner_id,
                         archived=bool(row.get("archived")), searcher_snapshot=None, searcher_shutdown=True,
                         searcher_failure=state == states.ERROR, progress=float(row.get("progress") or 0.0),
                         start_time=start, end_time=_time(row.get("end_time")) or start,
                         checkpoint_gc_done=True, project_id=project, notes=notes or None, unmanaged=False)
        b.imported(row, _add_with_id(b, exp, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "experiments")
    return b.result


def import_trials(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "trials", rows, dry_run=dry_run)
    todo = b.todo(rows)
    if dry_run:
        b.result.imported += len(todo)
        return b.result
    experiments = _ids(s, source, "experiments", (r["experiment_id"] for r in todo))
    free = _free(s, Trial, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        exp = experiments.get(str(row["experiment_id"]))
        if exp is None:
            b.skip(row, f"its experiment {row['experiment_id']} was not imported")
            continue
        state, why = finished_state(str(row["state"]))
        start = _time(row.get("start_time")) or utcnow()
        restarts = int(row.get("restarts") or 0)
        trial = Trial(experiment_id=exp, request_id=str(row.get("request_id") or f"imported-{row['id']}"),
                      hparams=row.get("hparams") or {}, seed=int(row.get("seed") or 0), state=state,
                      restarts=restarts, total_batches=0, runs=restarts + 1, start_time=start,
                      end_time=_time(row.get("end_time")) or start, runner_status=why, metrics_version=0)
        b.imported(row, _add_with_id(b, trial, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "trials")
    return b.result


# ---------------------------------------------------------------- metrics and logs: bulk, by watermark

def _copy_or_insert(s: Session, model: Type[Base], columns: Sequence[str], values: List[Tuple[Any, ...]],
                    json_columns: Set[str], encoded: Sequence[str] = ()) -> None:
    """Insert many rows: PostgreSQL's COPY in the session's transaction, else one executemany. `json_columns` are
    encoded here; `encoded` ones hold JSON text already (decoded again for the executemany)."""
    if not values:
        return
    table = model.__table__  # type: ignore[attr-defined]
    connection = s.connection()
    if connection.dialect.name == "postgresql":
        raw = connection.connection.driver_connection
        cols = ", ".join(f'"{c}"' for c in columns)
        with raw.cursor() as cursor:
            with cursor.copy(f'COPY "{table.name}" ({cols}) FROM STDIN') as copy:
                if json_columns:
                    for value in values:
                        copy.write_row(tuple(json.dumps(v) if c in json_columns and v is not None else v
                                             for c, v in zip(columns, value)))
                else:
                    write = copy.write_row
                    for value in values:
                        write(value)
        return
    s.execute(insert(table), [{c: json.loads(v) if c in encoded and v is not None else v
                               for c, v in zip(columns, value)} for value in values])


def _finite(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_problem(metrics: str, batch_metrics: Optional[str]) -> Optional[str]:
    """Why a row's metric cells (JSON text) cannot be stored, or None: each must be valid JSON (no NaN or Infinity,
    which PostgreSQL's json refuses too) of an object (`metrics`) and a list (`batch_metrics`)."""
    for name, text, kind in (("metrics", metrics, dict), ("batch_metrics", batch_metrics, list)):
        if text is None:
            continue
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError as e:
            return f"its {name} are not valid JSON ({e})"
        if not isinstance(value, kind):
            return f"its {name} are not a JSON {'object' if kind is dict else 'list'}"
    return None


MetricCells = Tuple[int, int, Optional[str], int, Any, Optional[str], Optional[str], bool]
"""A metric row as the route sends it (schemas.imports.METRIC_COLUMNS): id, trial_id, group, total_batches,
end_time, metrics (JSON text of an object), batch_metrics (JSON text of a list), archived."""

_METRIC_TABLES: Dict[str, Tuple[Type[Base], Tuple[str, ...]]] = {
    "TRAINING": (TrainingMetrics, ("trial_id", "steps_completed", "metrics", "batch_metrics", "end_time")),
    "VALIDATION": (ValidationMetrics, ("trial_id", "steps_completed", "metrics", "end_time")),
    "GENERIC": (GroupMetrics, ("trial_id", "group_name", "steps_completed", "metrics", "end_time")),
}


def import_metrics(s: Session, source: str, table: str, partition: str, rows: Sequence[MetricCells],
                   dry_run: bool) -> Result:
    """Metric rows of one source table (`table`, e.g. `metrics:TRAINING`, every row of `partition`), sent in
    increasing source id, as cells (MetricCells). One COPY per batch, one query for its trials' mapping and one for
    the trials (and their experiments) whose totals and best validations change.

    The metric cells are JSON text and go to the table as they came: on PostgreSQL its json input checks them (a
    batch it refuses is checked here row by row, the bad rows skipped with the reason, and the rest written); on
    SQLite (and in a dry run) each is parsed here. Validation rows are parsed for the best and latest validation."""
    result = Result()
    mark = watermark(s, source, table)
    fresh = [r for r in rows if r[0] > mark]
    result.already = len(rows) - len(fresh)
    trials = {int(old): new for old, new in _ids(s, source, "trials", {r[1] for r in fresh}).items()}
    values: List[Tuple[Any, ...]] = []
    ids: List[int] = []  # the source id of each of `values`
    validations: Dict[int, List[Tuple[int, Mapping[str, Any]]]] = {}
    most: Dict[int, int] = {}
    now = utcnow()
    training, validating = partition == "TRAINING", partition == "VALIDATION"
    check_here = dry_run or s.connection().dialect.name != "postgresql"
    for old_id, old_trial, group, steps, end, metrics, batch_metrics, archived in fresh:
        if archived:
            result.skip(f"{table}:{old_id}", "archived in Determined (superseded after the trial restarted from "
                                             "an earlier checkpoint)")
            continue
        trial = trials.get(old_trial)
        if trial is None and not dry_run:
            result.skip(f"{table}:{old_id}", f"its trial {old_trial} was not imported")
            continue
        metrics = metrics or "{}"
        if validating:
            problem = _json_problem(metrics, None)
            if problem is None:
                validations.setdefault(trial, []).append((steps, json.loads(metrics)))
        else:
            problem = _json_problem(metrics, batch_metrics) if check_here else None
        if problem:
            result.skip(f"{table}:{old_id}", problem)
            continue
        result.imported += 1
        if dry_run:
            continue
        end = _time(end) or now
        if training:  # COPY's text cells: the json columns as the JSON text that came
            values.append((trial, steps, metrics, batch_metrics or "[]", end))
        elif validating:
            values.append((trial, steps, metrics, end))
        else:
            values.append((trial, group or partition.lower(), steps, metrics, end))
        ids.append(old_id)
        if training or validating:
            most[trial] = max(most.get(trial, 0), steps)
        else:
            most.setdefault(trial, 0)
    if dry_run:
        return result
    model, columns = _METRIC_TABLES[partition]
    _write_metric_rows(s, table, model, columns, values, ids, result)
    touched = {v[0] for v in values}
    _update_trials(s, {t: n for t, n in most.items() if t in touched}, validations)
    if rows:
        _set_watermark(s, source, table, max(r[0] for r in rows))
    return result


def _write_metric_rows(s: Session, table: str, model: Type[Base], columns: Tuple[str, ...],
                       values: List[Tuple[Any, ...]], ids: List[int], result: Result) -> None:
    """COPY the rows (their JSON cells as text) in a savepoint. When PostgreSQL refuses the batch, the rows are
    checked here one by one: the bad ones are skipped with the reason (taken out of `values`, `ids` and the count)
    and the rest written."""
    if s.connection().dialect.name != "postgresql":
        _copy_or_insert(s, model, columns, values, set(), encoded=[c for c in columns if c in _JSON_COLUMNS])
        return
    import psycopg

    json_at = [i for i, c in enumerate(columns) if c in _JSON_COLUMNS]
    try:
        with s.begin_nested():
            _copy_or_insert(s, model, columns, values, set())
        return
    except psycopg.DataError as e:
        refusal = str(e).strip().splitlines()[0]
    kept_values, kept_ids = [], []
    for value, old_id in zip(values, ids):
        cells = [value[i] for i in json_at]
        problem = _json_problem(cells[0], cells[1] if len(cells) > 1 else None)
        if problem:
            result.skip(f"{table}:{old_id}", problem)
            result.imported -= 1
        else:
            kept_values.append(value)
            kept_ids.append(old_id)
    values[:], ids[:] = kept_values, kept_ids
    try:
        with s.begin_nested():
            _copy_or_insert(s, model, columns, values, set())
    except psycopg.DataError as e:
        raise RequestProblem(400, f"the database refused this batch of {table}'s metric rows: "
                                  f"{str(e).strip().splitlines()[0]} (first: {refusal})", [
            "nothing of the batch was imported; a source row whose metrics PostgreSQL cannot store as json "
            "must be fixed in the source"]) from None


_JSON_COLUMNS = ("metrics", "batch_metrics")


def _update_trials(s: Session, most: Mapping[int, int],
                   validations: Mapping[int, List[Tuple[int, Mapping[str, Any]]]]) -> None:
    """The trials' new metrics (`most`: trial -> its largest total batches in the batch): total batches, latest and
    best validation and the experiment's best, and a new metrics version. The trials and their experiments are read
    in one query each.

    Their learning curves are read again from their points: imported rows are no reports after the last (a source
    table comes in id order, not in steps, and a trial's id may be one a deleted trial had here), so the curves kept
    in the database are dropped in this transaction and the in-memory ones may not be caught up
    (insights/kept_curves.forget, CurveCache.rewritten), as when a trial's stored reports are replaced."""
    if not most:
        return
    with s.no_autoflush:
        found = {t.id: t for t in s.scalars(select(Trial).where(Trial.id.in_(sorted(most))))}
        exp_ids = sorted({t.experiment_id for t in found.values() if t.id in validations})
        exps = {e.id: e for e in s.scalars(select(Experiment).where(Experiment.id.in_(exp_ids)))} if exp_ids else {}
    kept_curves.forget(s.connection(), sorted(found))
    cache = curves.cache_of(s.get_bind())
    for trial in found.values():
        cache.rewritten(trial.id, (trial.metrics_version or 0) + 1)
    candidates: Dict[int, Tuple[Trial, Tuple[Any, ...], int, float]] = {}  # experiment -> its batch's best
    for trial_id in sorted(most):
        trial = found.get(trial_id)
        if trial is not None:
            exp = exps.get(trial.experiment_id)
            best = _update_trial(trial, exp, most[trial_id], validations.get(trial_id, []))
            if exp is not None and best is not None and (exp.id not in candidates or best[0] < candidates[exp.id][1]):
                candidates[exp.id] = (trial, *best)
    # The experiments' best in the one order of "best" (metric, more batches, lower trial id), as a live report's:
    # only the batch's best validation of each experiment is offered (one read of the best trial's rows on a tie).
    for exp_id, (trial, _, steps_done, value) in sorted(candidates.items()):
        best_validation.record_best(s, exps[exp_id], trial, steps_done, value)


def _update_trial(trial: Trial, exp: Optional[Experiment], steps: int,
                  validations: List[Tuple[int, Mapping[str, Any]]]) -> Optional[Tuple[Tuple[Any, ...], int, float]]:
    """The trial's totals, latest and best validation from the batch's rows; the key, steps and value of its best
    validation in the batch (None: none has the searcher metric)."""
    trial.total_batches = max(trial.total_batches or 0, steps)
    trial.metrics_version = (trial.metrics_version or 0) + 1
    if not validations:
        return None
    searcher = (exp.config or {}).get("searcher") or {} if exp is not None else {}
    metric = searcher.get("metric") if isinstance(searcher, dict) else None
    smaller = bool(searcher.get("smaller_is_better", True)) if isinstance(searcher, dict) else True
    latest_steps = -1
    best: Optional[Tuple[Tuple[Any, ...], int, float]] = None
    for steps_done, metrics in validations:
        if steps_done >= latest_steps:
            latest_steps = steps_done
            trial.latest_validation = dict(metrics)
        value = _finite(metrics.get(metric)) if metric else None
        if value is None:
            continue
        if trial.best_validation is None or (value < trial.best_validation if smaller else value > trial.best_validation):
            trial.best_validation = value
        key = validation_key(value, smaller, steps_done, trial.id)
        if best is None or key < best[0]:
            best = (key, steps_done, value)
    return best


def import_logs(s: Session, source: str, table: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    """Trial log lines of the source's task_logs, sent in increasing source id."""
    result = Result()
    mark = watermark(s, source, table)
    fresh = [r for r in rows if int(r["id"]) > mark]
    result.already = len(rows) - len(fresh)
    trials = _ids(s, source, "trials", {r["trial_id"] for r in fresh})
    values: List[Tuple[Any, ...]] = []
    for row in fresh:
        trial = trials.get(str(row["trial_id"]))
        if trial is None and not dry_run:
            result.skip(f"{table}:{row['id']}", f"its trial {row['trial_id']} was not imported")
            continue
        result.imported += 1
        values.append((trial, _time(row.get("timestamp")) or utcnow(), row.get("stream") or "stdout", row["message"]))
    if dry_run:
        return result
    _copy_or_insert(s, TrialLog, ("trial_id", "timestamp", "stream", "message"), values, set())
    if rows:
        _set_watermark(s, source, table, max(int(r["id"]) for r in rows))
    return result


# ---------------------------------------------------------------- checkpoints and the model registry

def import_checkpoints(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "checkpoints", rows, key="uuid", dry_run=dry_run)
    todo = b.todo(rows)
    taken = set(s.scalars(select(Checkpoint.uuid).where(Checkpoint.uuid.in_([r["uuid"] for r in todo]))))
    trials = _ids(s, source, "trials", (r["trial_id"] for r in todo if r.get("trial_id") is not None))
    latest: Dict[int, Tuple[int, str]] = {}
    for row in todo:
        if row["uuid"] in taken:
            b.skip(row, "a checkpoint with this uuid is already here (not from this import)")
            continue
        if row.get("trial_id") is None:
            b.skip(row, f"not a trial's checkpoint (task {row.get('task_id') or '?'})")
            continue
        if dry_run:
            b.result.imported += 1
            continue
        trial_id = trials.get(str(row["trial_id"]))
        trial = s.get(Trial, trial_id) if trial_id is not None else None
        if trial is None:
            b.skip(row, f"its trial {row['trial_id']} was not imported")
            continue
        metadata = dict(row.get("metadata") or {})
        steps = int(row.get("steps_completed") or 0)
        state = _CHECKPOINT_STATES.get(str(row["state"]), "ERROR")
        when = _time(row.get("report_time")) or utcnow()
        s.add(Checkpoint(uuid=row["uuid"], experiment_id=trial.experiment_id, trial_id=trial.id, state=state,
                         steps_completed=steps, resources=row.get("resources") or {},
                         framework=str(metadata.get("framework") or row.get("framework") or ""),
                         format=str(metadata.get("format") or row.get("format") or ""), metadata_=metadata,
                         determined_version=str(metadata.get("determined_version") or
                                                row.get("determined_version") or ""),
                         start_time=when, end_time=when))
        if state == "COMPLETED" and steps >= latest.get(trial.id, (-1, ""))[0]:
            latest[trial.id] = (steps, row["uuid"])
        b.imported(row, row["uuid"])
    s.flush()
    for trial_id, (steps, uuid) in latest.items():
        trial = s.get(Trial, trial_id)
        current = s.scalars(select(Checkpoint).where(Checkpoint.uuid == trial.latest_checkpoint_uuid)).first() \
            if trial is not None and trial.latest_checkpoint_uuid else None
        if trial is not None and (current is None or current.steps_completed <= steps):
            trial.latest_checkpoint_uuid = uuid
    return b.result


def import_models(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "models", rows, dry_run=dry_run)
    todo = b.todo(rows)
    taken = set(s.scalars(select(Model.name).where(Model.name.in_([r["name"] for r in todo]))))
    free = _free(s, Model, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        if row["name"] in taken:
            b.skip(row, f"a model named {row['name']!r} is already here (not from this import)")
            continue
        if dry_run:
            b.result.imported += 1
            continue
        owner_id, owner = _owner(s, source, row.get("owner_id"))
        workspace = 1
        if row.get("workspace_id") is not None:
            workspace = _ids(s, source, "workspaces", [row["workspace_id"]]).get(str(row["workspace_id"]), 1)
        description = row.get("description") or ""
        if row.get("notes"):  # a model here has no notes of its own: they follow its description
            description = (description + "\n\n" if description else "") + "Notes (imported from Determined):\n" + \
                str(row["notes"])
        model = Model(name=row["name"], description=description, metadata_=row.get("metadata") or {},
                      creation_time=_time(row.get("creation_time")) or utcnow(),
                      last_updated_time=_time(row.get("last_updated_time")) or _time(row.get("creation_time"))
                      or utcnow(), owner=owner, owner_id=owner_id, workspace_id=workspace,
                      labels=list(row.get("labels") or []), archived=bool(row.get("archived")))
        b.imported(row, _add_with_id(b, model, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "models")
    return b.result


def import_model_versions(s: Session, source: str, rows: Sequence[Mapping[str, Any]], dry_run: bool) -> Result:
    b = _Batch(s, source, "model_versions", rows, dry_run=dry_run)
    todo = b.todo(rows)
    if dry_run:
        b.result.imported += len(todo)
        return b.result
    models = _ids(s, source, "models", (r["model_id"] for r in todo))
    free = _free(s, ModelVersion, (r["id"] for r in todo))
    todo = _free_first(todo, free)
    for row in todo:
        model = models.get(str(row["model_id"]))
        if model is None:
            b.skip(row, f"its model {row['model_id']} was not imported")
            continue
        if s.scalars(select(Checkpoint.id).where(Checkpoint.uuid == row["checkpoint_uuid"])).first() is None:
            b.skip(row, f"its checkpoint {row['checkpoint_uuid']} was not imported")
            continue
        if s.scalars(select(ModelVersion.id).where(ModelVersion.model_id == model,
                                                   ModelVersion.version == row["version"])).first() is not None:
            b.skip(row, f"version {row['version']} of the model is already here (not from this import)")
            continue
        metadata = dict(row.get("metadata") or {})
        if row.get("labels"):  # a version here has no labels of its own: they are kept in its metadata
            metadata.setdefault("determined_labels", list(row["labels"]))
        version = ModelVersion(model_id=model, version=int(row["version"]), checkpoint_uuid=row["checkpoint_uuid"],
                               creation_time=_time(row.get("creation_time")) or utcnow(), name=row.get("name"),
                               comment=row.get("comment"), notes=row.get("notes"), metadata_=metadata)
        b.imported(row, _add_with_id(b, version, int(row["id"]), free))
    if b.explicit_ids:
        _bump_sequence(s, "model_versions")
    return b.result


ROW_KINDS: Dict[str, Callable[[Session, str, Sequence[Mapping[str, Any]], bool], Result]] = {
    "users": import_users, "workspaces": import_workspaces, "projects": import_projects,
    "experiments": import_experiments, "trials": import_trials, "checkpoints": import_checkpoints,
    "models": import_models, "model_versions": import_model_versions,
}
