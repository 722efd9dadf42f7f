"""The read routes' answers, in portable SQL over a `dbread.Reader`: the master serves them through its
SQLAlchemy session, and the CLI computes the same answers from a data dir no master runs on
(determined/master/views/local_reads.py) without starting the server stack.

Each function raises `RequestProblem` (404 and 400 with the reason) as the routes answer. Lists come as a
`Listing` (its rows and how to show one), so that the master can leave out a row that cannot be shown
(api/_deps.json_list) and the CLI can take the whole answer (`Listing.answer()`).
"""
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence

from determined.master.insights import curves
from determined.master.views import serialize
from determined.master.views.dbread import (
    CHECKPOINT_COLUMNS,
    EXPERIMENT_COLUMNS,
    MODEL_COLUMNS,
    TRIAL_COLUMNS,
    Reader,
    Row,
    in_list,
)
from determined.master.problems import RequestProblem, not_found

CHECKPOINT_STATES = ("ACTIVE", "COMPLETED", "ERROR", "DELETED", "PARTIALLY_DELETED")
ORDERS = {"asc": "asc", "ascending": "asc", "desc": "desc", "descending": "desc"}
MODEL_SORT_COLUMNS = ("name", "description", "creation_time", "last_updated_time")
LOG_PAGE_LIMIT = 10000


def order_of(order_by: str) -> str:
    """`asc` or `desc` from an `order_by` parameter; a 400 naming the choices otherwise."""
    order = ORDERS.get(order_by.lower())
    if order is None:
        raise RequestProblem(400, "invalid order_by", [f"order_by: {order_by!r}; allowed: asc, desc"])
    return order


def check_checkpoint_states(values: Optional[Iterable[str]]) -> List[str]:
    """Checkpoint states of a `states=` filter, upper-cased (a `STATE_` prefix is accepted); [] = no filter."""
    out = []
    for value in values or []:
        name = value.strip().upper()
        name = name[len("STATE_"):] if name.startswith("STATE_") else name
        if name not in CHECKPOINT_STATES:
            raise RequestProblem(400, "invalid checkpoint state filter",
                                 [f"states: {value!r} is not a checkpoint state; allowed: {', '.join(CHECKPOINT_STATES)}"])
        out.append(name)
    return out


class Listing(NamedTuple):
    """A list answer: `{key: [render(row) for row in rows], **extra}`; `ident` names a row in errors."""

    key: str
    rows: Sequence[Any]
    render: Callable[[Any], Dict[str, Any]]
    ident: Callable[[Any], Any]
    extra: Optional[Dict[str, Any]] = None

    def answer(self) -> Dict[str, Any]:
        return {self.key: [self.render(row) for row in self.rows], **(self.extra or {})}


# ---------------------------------------------------------------- experiments and trials


def experiment_row(db: Reader, experiment_id: int) -> Row:
    exp = db.first(f"SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = :id", id=experiment_id)
    if exp is None:
        raise not_found("experiment", experiment_id)
    return exp


def trial_row(db: Reader, trial_id: int) -> Row:
    trial = db.first(f"SELECT {TRIAL_COLUMNS} FROM trials WHERE id = :id", id=trial_id)
    if trial is None:
        raise not_found("trial", trial_id)
    return trial


def experiments(db: Reader) -> Listing:
    """`GET /experiments`."""
    rows = db.rows(f"SELECT {EXPERIMENT_COLUMNS} FROM experiments ORDER BY id")
    counts = serialize.trial_counts(db, [e.id for e in rows]) if rows else {}
    return Listing("experiments", rows, lambda e: serialize.experiment(db, e, counts.get(e.id, 0)), lambda e: e.id)


def experiment(db: Reader, experiment_id: int) -> Dict[str, Any]:
    """`GET /experiments/{id}`: the experiment and its trials, each with its status."""
    exp = experiment_row(db, experiment_id)
    trials = db.rows(f"SELECT {TRIAL_COLUMNS} FROM trials WHERE experiment_id = :e ORDER BY id", e=experiment_id)
    return {"experiment": serialize.experiment(db, exp, len(trials)), "trials": serialize.trials(db, exp, trials)}


def _checkpoints(db: Reader, where: str, order: str, states: Optional[Iterable[str]], **params: Any) -> List[Row]:
    wanted = check_checkpoint_states(states)
    sql = f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE {where}"
    if wanted:
        names, more = in_list("s", wanted)
        sql += f" AND state IN {names}"
        params.update(more)
    return db.rows(f"{sql} ORDER BY {order}", **params)


def _checkpoint_listing(db: Reader, rows: Sequence[Row]) -> Listing:
    return Listing("checkpoints", rows, lambda c: serialize.checkpoint(db, c), lambda c: c.uuid)


def experiment_checkpoints(db: Reader, experiment_id: int, states: Optional[Iterable[str]] = None) -> Listing:
    """`GET /experiments/{id}/checkpoints?states=...`, ordered by id."""
    experiment_row(db, experiment_id)
    return _checkpoint_listing(db, _checkpoints(db, "experiment_id = :e", "id", states, e=experiment_id))


def trial(db: Reader, trial_id: int) -> Dict[str, Any]:
    """`GET /trials/{id}`: the trial with its status, metrics and checkpoints."""
    t = trial_row(db, trial_id)
    exp = experiment_row(db, t.experiment_id)
    training = db.rows("SELECT steps_completed, metrics, batch_metrics, end_time FROM training_metrics "
                       "WHERE trial_id = :t ORDER BY steps_completed, id", t=trial_id)
    validation = db.rows("SELECT steps_completed, metrics, end_time FROM validation_metrics "
                         "WHERE trial_id = :t ORDER BY steps_completed, id", t=trial_id)
    checkpoints = db.rows(f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE trial_id = :t ORDER BY id", t=trial_id)
    groups = db.rows("SELECT DISTINCT group_name FROM group_metrics WHERE trial_id = :t", t=trial_id)
    return {
        "trial": serialize.trials(db, exp, [t])[0],
        "training_metrics": serialize.training_metrics(training),
        "validation_metrics": serialize.validation_metrics(validation),
        "metric_groups": ["training", "validation"] + sorted(g.group_name for g in groups),
        "checkpoints": [serialize.checkpoint(db, c) for c in checkpoints],
    }


MAX_GROUP_NAME = 128


def check_group(group: Any) -> str:
    """A metric group name as Determined 0.38 accepts it: a non-empty string without '.' (400 otherwise)."""
    if not isinstance(group, str) or not group or "." in group or len(group) > MAX_GROUP_NAME:
        raise RequestProblem(400, f"metric group: expected a non-empty name without '.' of at most {MAX_GROUP_NAME} "
                                  f"characters, got {group!r}")
    return group


def trial_metrics(db: Reader, trial_id: int, group: str, max_points: Optional[Any] = None) -> Dict[str, Any]:
    """`GET /trials/{id}/metrics?group=G[&max_points=N]`: the trial's metrics of one group (`training`,
    `validation`, or any group it reported with report_metrics), ordered by steps_completed; all of them, or with
    `max_points` downsampled to that many points per metric keeping the extremes (curves.py)."""
    points = curves.check_max_points(max_points) if max_points is not None else None
    trial_row(db, trial_id)
    if group == "training":
        rows = db.rows("SELECT steps_completed, metrics, batch_metrics, end_time FROM training_metrics "
                       "WHERE trial_id = :t ORDER BY steps_completed, id", t=trial_id)
    elif group == "validation":
        rows = db.rows("SELECT steps_completed, metrics, end_time FROM validation_metrics "
                       "WHERE trial_id = :t ORDER BY steps_completed, id", t=trial_id)
    else:
        rows = db.rows("SELECT steps_completed, metrics, end_time FROM group_metrics "
                       "WHERE trial_id = :t AND group_name = :g ORDER BY steps_completed, id", t=trial_id,
                       g=check_group(group))
    if points is not None:
        rows = [rows[i] for i in curves.downsample([r.metrics or {} for r in rows], points)]
    render = serialize.training_metrics if group == "training" else serialize.validation_metrics
    return {"group": group, "metrics": render(rows)}


def trial_checkpoints(db: Reader, trial_id: int, states: Optional[Iterable[str]] = None) -> Listing:
    """`GET /trials/{id}/checkpoints?states=...`, ordered by steps_completed, then id."""
    trial_row(db, trial_id)
    return _checkpoint_listing(db, _checkpoints(db, "trial_id = :t", "steps_completed, id", states, t=trial_id))


def trial_logs(db: Reader, trial_id: int, offset: int = 0, limit: int = 1000) -> Dict[str, Any]:
    """`GET /trials/{id}/logs`: lines in the order they were captured; `next_offset` continues after them."""
    if offset < 0 or not 1 <= limit <= LOG_PAGE_LIMIT:
        raise RequestProblem(400, "invalid log page", [f"offset must be >= 0 and limit 1 to {LOG_PAGE_LIMIT}"])
    t = trial_row(db, trial_id)
    rows = db.rows("SELECT id, timestamp, stream, message FROM trial_logs WHERE trial_id = :t ORDER BY id "
                   "LIMIT :limit OFFSET :offset", t=trial_id, limit=limit, offset=offset)
    return {
        "logs": [{"id": r.id, "timestamp": serialize.timestamp(r.timestamp), "stream": r.stream, "message": r.message}
                 for r in rows],
        "next_offset": offset + len(rows),
        "trial_state": t.state,
    }


# ---------------------------------------------------------------- checkpoints and models


def checkpoint(db: Reader, uuid: str) -> Dict[str, Any]:
    """`GET /checkpoints/{uuid}`."""
    row = db.first(f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE uuid = :u", u=uuid)
    if row is None:
        raise RequestProblem(404, f"checkpoint {uuid} not found")
    return {"checkpoint": serialize.checkpoint(db, row)}


def _like(text: str) -> str:
    """A LIKE pattern (escape `\\`) matching `text` anywhere, case-insensitively against lower()."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def model_rows(db: Reader, sort_by: str = "name", order_by: str = "asc", name: str = "",
               description: str = "") -> List[Row]:
    """Models sorted by a column (text case-insensitively, ties by id), filtered by case-insensitive substrings of
    name and description."""
    column = sort_by.lower()
    if column not in MODEL_SORT_COLUMNS:
        raise RequestProblem(400, "invalid sort_by", [f"sort_by: {sort_by!r}; allowed: {', '.join(MODEL_SORT_COLUMNS)}"])
    order = order_of(order_by)
    where, params = [], {}
    if name:
        where.append("lower(name) LIKE :name ESCAPE '\\'")
        params["name"] = _like(name)
    if description:
        where.append("lower(description) LIKE :description ESCAPE '\\'")
        params["description"] = _like(description)
    key = f"lower({column})" if column in ("name", "description") else column
    sql = f"SELECT {MODEL_COLUMNS} FROM models" + (" WHERE " + " AND ".join(where) if where else "")
    return db.rows(f"{sql} ORDER BY {key} {order}, id {order}", **params)


def models(db: Reader, sort_by: str = "name", order_by: str = "asc", name: str = "", description: str = "") -> Listing:
    """`GET /models`."""
    return Listing("models", model_rows(db, sort_by, order_by, name, description), lambda m: serialize.model(db, m),
                   lambda m: m.name)


def model(db: Reader, name: str) -> Dict[str, Any]:
    """`GET /models/{name}`."""
    row = db.first(f"SELECT {MODEL_COLUMNS} FROM models WHERE name = :n", n=name)
    if row is None:
        raise RequestProblem(404, f"model {name!r} not found")
    return {"model": serialize.model(db, row)}


# ---------------------------------------------------------------- config templates


def templates(db: Reader) -> Dict[str, Any]:
    """`GET /templates`."""
    rows = db.rows("SELECT name, config, owner FROM config_templates ORDER BY name")
    return {"templates": [serialize.template(r) for r in rows]}


def template(db: Reader, name: str) -> Dict[str, Any]:
    """`GET /templates/{name}`."""
    row = db.first("SELECT name, config, owner FROM config_templates WHERE name = :n", n=name)
    if row is None:
        known = [r.name for r in db.rows("SELECT name FROM config_templates ORDER BY name LIMIT 20")]
        raise RequestProblem(404, f"template {name!r} not found; " + (
            f"the templates are: {', '.join(known)}" if known else "there are no templates (det template create)"))
    return {"template": serialize.template(row)}
