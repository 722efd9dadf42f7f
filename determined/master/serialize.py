"""The JSON shapes of experiments, trials, checkpoints, metrics and registered models in API answers
(docs/internals.md)."""
import datetime
from typing import Any, Dict, List, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.config import InvalidExperimentConfig, canonical_hparams, dotted, hparam_leaves
from determined.master.log_policies import latest_label
from determined.config import redaction
from determined.master.db import Checkpoint, Experiment, TrainingMetrics, Trial, ValidationMetrics
from determined.master.db.models import Model, ModelVersion


def timestamp(value: Optional[datetime.datetime]) -> Optional[str]:
    return None if value is None else value.isoformat() + "Z"


def searched_hparams(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The hyperparameters a search varies (not constants), nested ones too: each with its dotted name (what tables
    and charts show), its path in a trial's nested values, and its type."""
    specs = config.get("hyperparameters") or {}
    try:
        leaves = hparam_leaves(canonical_hparams(specs))
    except InvalidExperimentConfig:
        return []
    return [{"name": dotted(path), "path": list(path), "type": spec["type"]}
            for path, spec in leaves if spec.get("type") != "const"]


def experiment(s: Session, exp: Experiment) -> Dict[str, Any]:
    config = redaction.experiment_config(exp.config)  # secrets are for the trial's own context only
    num_trials = s.scalar(select(func.count()).select_from(Trial).where(Trial.experiment_id == exp.id)) or 0
    return {
        "id": exp.id,
        "state": exp.state,
        "name": config.get("name") or config.get("description") or "",
        "description": config.get("description") or "",
        "workspace": config.get("workspace") or "",
        "project": config.get("project") or "",
        "searched_hparams": searched_hparams(config),
        "labels": list(config.get("labels") or []),
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
    }


def trial(t: Trial) -> Dict[str, Any]:
    return {
        "id": t.id,
        "experiment_id": t.experiment_id,
        "request_id": t.request_id,
        "state": t.state,
        "hparams": t.hparams,
        "seed": t.seed,
        "restarts": t.restarts,
        "total_batches": t.total_batches,
        "start_time": timestamp(t.start_time),
        "end_time": timestamp(t.end_time),
        "best_validation": t.best_validation,
        "latest_validation": t.latest_validation,
        "latest_checkpoint_uuid": t.latest_checkpoint_uuid,
        "warm_start_checkpoint_uuid": t.warm_start_checkpoint_uuid,
        "log_policy_matched": latest_label(t),
        "log_policy_matches": list(t.log_policy_matches or []),
    }


def checkpoint(s: Session, c: Checkpoint) -> Dict[str, Any]:
    t = s.get(Trial, c.trial_id)
    exp = s.get(Experiment, c.experiment_id)
    validation = s.scalars(
        select(ValidationMetrics)
        .where(ValidationMetrics.trial_id == c.trial_id, ValidationMetrics.steps_completed == c.steps_completed)
        .order_by(ValidationMetrics.id.desc())
        .limit(1)
    ).first()
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
        "model_versions": model_versions_of(s, c.uuid),
    }


def model_versions_of(s: Session, checkpoint_uuid: str) -> List[Dict[str, Any]]:
    """The registry entries pointing at a checkpoint: `[{"model_name", "version"}]`."""
    rows = s.execute(
        select(Model.name, ModelVersion.version)
        .join(Model, Model.id == ModelVersion.model_id)
        .where(ModelVersion.checkpoint_uuid == checkpoint_uuid)
        .order_by(Model.name, ModelVersion.version)
    )
    return [{"model_name": name, "version": version} for name, version in rows]


def model(s: Session, m: Model) -> Dict[str, Any]:
    num_versions = s.scalar(select(func.count()).select_from(ModelVersion).where(ModelVersion.model_id == m.id)) or 0
    return {
        "name": m.name,
        "description": m.description,
        "metadata": m.metadata_,
        "creation_time": timestamp(m.creation_time),
        "last_updated_time": timestamp(m.last_updated_time),
        "num_versions": int(num_versions),
        "owner": m.owner,
    }


def model_version(s: Session, m: Model, v: ModelVersion) -> Dict[str, Any]:
    ckpt = s.scalars(select(Checkpoint).where(Checkpoint.uuid == v.checkpoint_uuid)).one()
    return {
        "version": v.version,
        "model_name": m.name,
        "creation_time": timestamp(v.creation_time),
        "checkpoint": checkpoint(s, ckpt),
    }


def training_metrics(rows: List[TrainingMetrics]) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "batch_metrics": r.batch_metrics,
             "end_time": timestamp(r.end_time)} for r in rows]


def validation_metrics(rows: List[ValidationMetrics]) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "end_time": timestamp(r.end_time)} for r in rows]
