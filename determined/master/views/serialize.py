"""The JSON shapes of experiments, trials, checkpoints, metrics and registered models in API answers
(docs/internals.md).

`db` is the master's SQLAlchemy session or any `dbread.Reader` (the CLI reads a data dir with sqlite3); rows
are ORM objects or `dbread.Row`s: both have the same attributes. Nothing here imports the server stack.
"""
import datetime
from typing import Any, Dict, List, Optional, Sequence, Tuple

from determined.config import redaction
from determined.master.lifecycle import trial_status
from determined.master.views.dbread import CHECKPOINT_COLUMNS, Row, in_list, reader_of

TRIAL_TERMINAL = ("COMPLETED", "CANCELED", "ERROR")


def timestamp(value: Optional[datetime.datetime]) -> Optional[str]:
    return None if value is None else value.isoformat() + "Z"


def trial_counts(db: Any, experiment_ids: Sequence[int]) -> Dict[int, int]:
    """The number of trials of each experiment."""
    ids, params = in_list("e", list(experiment_ids))
    rows = reader_of(db).rows(f"SELECT experiment_id, COUNT(*) AS n FROM trials WHERE experiment_id IN {ids} "
                              f"GROUP BY experiment_id", **params)
    return {r.experiment_id: int(r.n) for r in rows}


def searched_hparams(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The hyperparameters a search varies (not constants), nested ones too: each with its dotted name (what tables
    and charts show), its path in a trial's nested values, its type and its canonical spec (ranges, `base`, `vals`)."""
    from determined.config import InvalidExperimentConfig, canonical_hparams, dotted, hparam_leaves

    specs = config.get("hyperparameters") or {}
    try:
        leaves = hparam_leaves(canonical_hparams(specs))
    except InvalidExperimentConfig:
        return []
    return [{"name": dotted(path), "path": list(path), "type": spec["type"], "spec": spec}
            for path, spec in leaves if spec.get("type") != "const"]


def project_of(db: Any, project_id: Optional[int]) -> Dict[str, Any]:
    """`{"project_id", "project", "workspace_id", "workspace"}` of a project id (NULL: the default project, 1)."""
    pid = project_id or 1
    row = reader_of(db).remembered(("project", pid), "SELECT p.name, p.workspace_id, w.name AS workspace_name FROM "
                                   "projects p JOIN workspaces w ON w.id = p.workspace_id WHERE p.id = :p", p=pid)
    return {"project_id": pid, "project": row.name if row is not None else "",
            "workspace_id": row.workspace_id if row is not None else None,
            "workspace": row.workspace_name if row is not None else ""}


def workspace_name(db: Any, workspace_id: Optional[int]) -> str:
    wid = workspace_id or 1
    row = reader_of(db).remembered(("workspace", wid), "SELECT name FROM workspaces WHERE id = :w", w=wid)
    return row.name if row is not None else ""


def experiment(db: Any, exp: Any, num_trials: Optional[int] = None) -> Dict[str, Any]:
    config = redaction.experiment_config(exp.config)  # secrets are for the trial's own context only
    if num_trials is None:
        num_trials = trial_counts(db, [exp.id]).get(exp.id, 0)
    return {
        "id": exp.id,
        "state": exp.state,
        "name": config.get("name") or config.get("description") or "",
        "description": config.get("description") or "",
        **project_of(db, exp.project_id),  # where it is now (moves do not change its config)
        "searched_hparams": searched_hparams(config),
        "labels": list(config.get("labels") or []),
        "notes": exp.notes or "",
        "config": config,
        "owner": exp.owner,
        "archived": bool(exp.archived),
        "start_time": timestamp(exp.start_time),
        "end_time": timestamp(exp.end_time),
        "progress": float(exp.progress or 0.0),
        "searcher_metric": config["searcher"]["metric"],
        "smaller_is_better": bool(config["searcher"].get("smaller_is_better", True)),
        "num_trials": int(num_trials),
        "best_validation": exp.best_validation,
        "best_trial_id": exp.best_trial_id,
        "unmanaged": bool(getattr(exp, "unmanaged", False)),
        "external_experiment_id": getattr(exp, "external_experiment_id", None),
    }


def trial(t: Any, status: Optional[Tuple[str, Optional[str]]] = None) -> Dict[str, Any]:
    """A trial; `status` is its (status, reason) from determined.master.lifecycle.trial_status, when known.

    `start_time` is when its first run started (null while it has never run) and `end_time` when it stopped
    training for good (null until it ended); `stopped_training_time`, while it has not ended, when it stopped
    training to wait (null while it trains or waits for a slot to train).
    """
    return {
        "id": t.id,
        "experiment_id": t.experiment_id,
        "request_id": t.request_id,
        "state": t.state,
        "status": status[0] if status else None,
        "status_reason": status[1] if status else None,
        "hparams": t.hparams,
        "seed": t.seed,
        "restarts": t.restarts,
        "total_batches": t.total_batches,
        "start_time": timestamp(t.start_time) if t.runs else None,
        "end_time": timestamp(t.end_time) if t.state in TRIAL_TERMINAL else None,
        # The stored end_time of a trial that has not ended is when its last operation completed: it stopped
        # training then, and waits (for a promotion, the search method, its experiment's activation).
        "stopped_training_time": timestamp(t.end_time) if t.state not in TRIAL_TERMINAL else None,
        "best_validation": t.best_validation,
        "latest_validation": t.latest_validation,
        "latest_checkpoint_uuid": t.latest_checkpoint_uuid,
        "warm_start_checkpoint_uuid": t.warm_start_checkpoint_uuid,
        "log_policy_matched": latest_label(t),
        "log_policy_matches": list(t.log_policy_matches or []),
        "runner_status": t.runner_status,
        "external_trial_id": getattr(t, "external_trial_id", None),
    }


def latest_label(t: Any) -> Optional[str]:
    """The name of the log policy that matched the trial last (Determined's `log_policy_matched`), if any."""
    names = [m.get("name") for m in t.log_policy_matches or [] if m.get("name")]
    return names[-1] if names else None


def trials(db: Any, exp: Any, rows: Sequence[Any]) -> List[Dict[str, Any]]:
    """Trials of the experiment `exp`, each with its status and the reason."""
    found = trial_status.statuses(reader_of(db), exp, rows)
    return [trial(t, found.get(t.id)) for t in rows]


def checkpoint(db: Any, c: Any) -> Dict[str, Any]:
    q = reader_of(db)
    t = q.remembered(("hparams", c.trial_id), "SELECT hparams FROM trials WHERE id = :id", id=c.trial_id)
    exp = q.remembered(("config", c.experiment_id), "SELECT config FROM experiments WHERE id = :id", id=c.experiment_id)
    validation = q.first("SELECT metrics FROM validation_metrics WHERE trial_id = :t AND steps_completed = :s "
                         "ORDER BY id DESC LIMIT 1", t=c.trial_id, s=c.steps_completed)
    return {
        "uuid": c.uuid,
        "experiment_id": c.experiment_id,
        "trial_id": c.trial_id,
        "state": c.state,
        "steps_completed": c.steps_completed,
        "batch_number": c.steps_completed,
        "resources": c.resources,
        "framework": c.framework,
        "format": c.format,
        "metadata": c.metadata_,
        "hparams": t.hparams if t is not None else {},
        "validation_metrics": validation.metrics if validation is not None else {},
        "determined_version": c.determined_version,
        "start_time": timestamp(c.start_time),
        "end_time": timestamp(c.end_time),
        "storage": redaction.storage(exp.config.get("checkpoint_storage")) if exp is not None else None,
        "model_versions": model_versions_of(q, c.uuid),
    }


def model_versions_of(db: Any, checkpoint_uuid: str) -> List[Dict[str, Any]]:
    """The registry entries pointing at a checkpoint: `[{"model_name", "version"}]`."""
    rows = reader_of(db).rows("SELECT m.name, v.version FROM model_versions v JOIN models m ON m.id = v.model_id "
                              "WHERE v.checkpoint_uuid = :u ORDER BY m.name, v.version", u=checkpoint_uuid)
    return [{"model_name": r.name, "version": r.version} for r in rows]


def model(db: Any, m: Any) -> Dict[str, Any]:
    num_versions = reader_of(db).scalar("SELECT COUNT(*) FROM model_versions WHERE model_id = :m", m=m.id) or 0
    return {
        "name": m.name,
        "description": m.description,
        "metadata": m.metadata_,
        "creation_time": timestamp(m.creation_time),
        "last_updated_time": timestamp(m.last_updated_time),
        "num_versions": int(num_versions),
        "owner": m.owner,
        "workspace_id": m.workspace_id or 1,
        "workspace": workspace_name(db, m.workspace_id),
        "id": m.id,
        "labels": list(m.labels or []),
        "archived": bool(m.archived),
    }


def model_version(db: Any, m: Any, v: Any) -> Dict[str, Any]:
    q = reader_of(db)
    ckpt = q.first(f"SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE uuid = :u", u=v.checkpoint_uuid)
    assert ckpt is not None  # a foreign key holds it
    return {
        "version": v.version,
        "model_name": m.name,
        "model_id": m.id,
        "name": v.name or "",
        "comment": v.comment or "",
        "notes": v.notes or "",
        "metadata": v.metadata_ or {},
        "creation_time": timestamp(v.creation_time),
        "checkpoint": checkpoint(q, ckpt),
    }


def template(t: Any) -> Dict[str, Any]:
    """A config template (secrets of its config hidden, as an experiment's)."""
    return {"name": t.name, "config": redaction.experiment_config(t.config), "owner": t.owner}


def training_metrics(rows: Sequence[Any]) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "batch_metrics": r.batch_metrics,
             "end_time": timestamp(r.end_time)} for r in rows]


def validation_metrics(rows: Sequence[Any]) -> List[Dict[str, Any]]:
    """Validation metrics, or the metrics of any other group (same shape)."""
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "end_time": timestamp(r.end_time)} for r in rows]


__all__ = ["Row", "checkpoint", "experiment", "model", "model_version", "model_versions_of", "template", "timestamp",
           "training_metrics", "trial", "trial_counts", "trials", "validation_metrics"]
