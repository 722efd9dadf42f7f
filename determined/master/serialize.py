"""The JSON shapes of experiments, trials, checkpoints and metrics in API answers (docs/internals.md)."""
import datetime
from typing import Any, Dict, List, Optional

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master.db import Checkpoint, Experiment, TrainingMetrics, Trial, ValidationMetrics


def timestamp(value: Optional[datetime.datetime]) -> Optional[str]:
    return None if value is None else value.isoformat() + "Z"


def experiment(s: Session, exp: Experiment) -> Dict[str, Any]:
    config = exp.config
    num_trials = s.scalar(select(func.count()).select_from(Trial).where(Trial.experiment_id == exp.id)) or 0
    return {
        "id": exp.id,
        "state": exp.state,
        "description": config.get("description") or "",
        "labels": list(config.get("labels") or []),
        "config": config,
        "owner": exp.owner,
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
        "storage": exp.config.get("checkpoint_storage") if exp is not None else None,
    }


def training_metrics(rows: List[TrainingMetrics]) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "batch_metrics": r.batch_metrics,
             "end_time": timestamp(r.end_time)} for r in rows]


def validation_metrics(rows: List[ValidationMetrics]) -> List[Dict[str, Any]]:
    return [{"steps_completed": r.steps_completed, "metrics": r.metrics, "end_time": timestamp(r.end_time)} for r in rows]
