"""Trial source infos (Determined 0.26): which checkpoint or model version a trial used, and the metrics read
through them.

A trial (usually a batch-inference run) reports `{"checkpoint_uuid"}` (`report_task_using_checkpoint`) or
`{"model_id", "model_version"}` (`report_task_using_model_version`; the link holds the version and its checkpoint)
for itself. `Checkpoint.get_metrics` then reads the metrics of every trial linked to the checkpoint, directly or
through one of its model versions; `ModelVersion.get_metrics` those of the trials linked to that version (as
Determined's master answers them). Every user may read every checkpoint and model here, so any checkpoint or
version that exists may be linked, and whoever reads it may read these metrics.

Deleting a model version keeps its links as links to its checkpoint; deleting an experiment removes the links of
its trials and the links to its checkpoints (`forget_experiment`).
"""
from typing import Any, Dict, List, Optional, Sequence

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from determined.master.registry import model_registry
from determined.master.db import Checkpoint, Model, ModelVersion, Trial, TrialSourceInfo, utcnow
from determined.master.views.dbread import Reader
from determined.master.problems import RequestProblem
from determined.master.views.reads import check_group
from determined.master.views.serialize import timestamp

KINDS = ("INFERENCE", "FINE_TUNING")
MAX_LINKS_PER_TRIAL = 1000
MAX_UUID_CHARS = 64


def _problem(field: str, message: str, status: int = 400) -> RequestProblem:
    return RequestProblem(status, f"invalid trial source info: {message}", [f"{field}: {message}"])


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _problem(field, f"expected a positive integer, got {value!r}"[:200])
    return value


def check_kind(value: Any) -> str:
    if value not in KINDS:
        raise _problem("kind", f"expected one of {', '.join(KINDS)}, got {value!r}"[:200])
    return str(value)


def check_uuid(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_UUID_CHARS or not value.isprintable():
        raise _problem("checkpoint_uuid", f"expected a checkpoint uuid (a string of at most {MAX_UUID_CHARS} "
                                          f"characters), got {value!r}"[:300])
    return value


def _version_by_id(s: Session, model_id: int, number: int) -> ModelVersion:
    model = s.get(Model, model_id)
    if model is None:
        raise _problem("model_id", f"model {model_id} not found", 404)
    return model_registry.get_version(s, model, number)


def report(s: Session, trial: Trial, body: Any) -> Dict[str, Any]:
    """`POST /trials/{id}/source_info`: link the trial to a checkpoint or a model version (a repeat is a no-op)."""
    fields = model_registry.check_body(body, ("checkpoint_uuid", "model_id", "model_version", "kind"), "trial source info")
    kind = check_kind(fields.get("kind", "INFERENCE"))
    version: Optional[ModelVersion] = None
    if "model_id" in fields or "model_version" in fields:
        if "model_id" not in fields or "model_version" not in fields:
            raise _problem("model_version", "give model_id and model_version together")
        version = _version_by_id(s, _positive_int(fields["model_id"], "model_id"),
                                 _positive_int(fields["model_version"], "model_version"))
    if "checkpoint_uuid" in fields:
        uuid = check_uuid(fields["checkpoint_uuid"])
        if version is not None and version.checkpoint_uuid != uuid:
            raise _problem("checkpoint_uuid", f"checkpoint {uuid} is not the checkpoint of that model version "
                                              f"({version.checkpoint_uuid})")
    elif version is not None:
        uuid = version.checkpoint_uuid
    else:
        raise _problem("checkpoint_uuid", "required: the uuid of the checkpoint the trial used (or model_id and "
                                          "model_version)")
    if s.scalars(select(Checkpoint.id).where(Checkpoint.uuid == uuid)).first() is None:
        raise _problem("checkpoint_uuid", f"checkpoint {uuid} not found", 404)
    version_id = version.id if version is not None else None
    same = select(TrialSourceInfo.id).where(
        TrialSourceInfo.trial_id == trial.id, TrialSourceInfo.checkpoint_uuid == uuid, TrialSourceInfo.kind == kind,
        TrialSourceInfo.model_version_id.is_(None) if version_id is None
        else TrialSourceInfo.model_version_id == version_id)
    if s.scalars(same).first() is None:
        count = s.scalar(select(func.count()).select_from(TrialSourceInfo)
                         .where(TrialSourceInfo.trial_id == trial.id)) or 0
        if count >= MAX_LINKS_PER_TRIAL:
            raise RequestProblem(400, f"trial {trial.id} already reported {count} source infos, the most one trial "
                                      "may keep")
        s.add(TrialSourceInfo(trial_id=trial.id, checkpoint_uuid=uuid, model_version_id=version_id, kind=kind,
                              created_at=utcnow()))
        s.flush()
    return {"trial_source_info": {"trial_id": trial.id, "checkpoint_uuid": uuid, "kind": kind,
                                  "model_id": version.model_id if version is not None else None,
                                  "model_version": version.version if version is not None else None}}


# ---------------------------------------------------------------- keeping links valid


def forget_experiment(s: Session, trial_ids: Sequence[int], checkpoint_uuids: Sequence[str]) -> None:
    """Before an experiment's rows are deleted: the links its trials made and the links to its checkpoints."""
    if trial_ids:
        s.execute(delete(TrialSourceInfo).where(TrialSourceInfo.trial_id.in_(list(trial_ids))))
    if checkpoint_uuids:
        s.execute(delete(TrialSourceInfo).where(TrialSourceInfo.checkpoint_uuid.in_(list(checkpoint_uuids))))


# ---------------------------------------------------------------- reads


def _kind_filter(kind: Optional[str]) -> str:
    if kind is None:
        return ""
    check_kind(kind)
    return " AND kind = :kind"


def _metrics_of(db: Reader, link_where: str, group: Optional[str], kind: Optional[str], **params: Any
                ) -> Dict[str, Any]:
    """The metrics of the trials of the links matching `link_where`: trial by trial (ascending id), each group in
    the order training, validation, then the others by name, each by steps_completed."""
    where = link_where + _kind_filter(kind)
    if kind is not None:
        params["kind"] = kind
    trial_ids = [r.trial_id for r in db.rows(
        f"SELECT DISTINCT trial_id FROM trial_source_infos WHERE {where} ORDER BY trial_id", **params)]
    linked = f"trial_id IN (SELECT trial_id FROM trial_source_infos WHERE {where})"
    found: List[Any] = []
    if group in (None, "training"):
        found += [("training", r) for r in db.rows(
            "SELECT trial_id, steps_completed, metrics, batch_metrics, end_time FROM training_metrics "
            f"WHERE {linked} ORDER BY trial_id, steps_completed, id", **params)]
    if group in (None, "validation"):
        found += [("validation", r) for r in db.rows(
            "SELECT trial_id, steps_completed, metrics, end_time FROM validation_metrics "
            f"WHERE {linked} ORDER BY trial_id, steps_completed, id", **params)]
    if group not in ("training", "validation"):
        extra = ""
        if group is not None:
            extra = " AND group_name = :group"
            params["group"] = check_group(group)
        found += [(r.group_name, r) for r in db.rows(
            "SELECT trial_id, group_name, steps_completed, metrics, end_time FROM group_metrics "
            f"WHERE {linked}{extra} ORDER BY trial_id, group_name, steps_completed, id", **params)]
    rank = {"training": 0, "validation": 1}
    found.sort(key=lambda item: (item[1].trial_id, rank.get(item[0], 2), item[0]))  # stable: steps stay in order
    metrics = []
    for name, r in found:
        entry = {"trial_id": r.trial_id, "group": name, "steps_completed": r.steps_completed, "metrics": r.metrics,
                 "end_time": timestamp(r.end_time)}
        if name == "training":
            entry["batch_metrics"] = r.batch_metrics
        metrics.append(entry)
    return {"trial_ids": trial_ids, "metrics": metrics}


def checkpoint_metrics(db: Reader, uuid: str, group: Optional[str] = None, kind: Optional[str] = None
                       ) -> Dict[str, Any]:
    """`GET /checkpoints/{uuid}/metrics`: the metrics of the trials that reported using the checkpoint, directly or
    through a model version of it."""
    if db.first("SELECT id FROM checkpoints WHERE uuid = :u", u=uuid) is None:
        raise RequestProblem(404, f"checkpoint {uuid} not found")
    return _metrics_of(db, "checkpoint_uuid = :u", group, kind, u=uuid)


def model_version_metrics(db: Reader, version_id: int, group: Optional[str] = None, kind: Optional[str] = None
                          ) -> Dict[str, Any]:
    """`GET /models/{name}/versions/{n}/metrics`: the metrics of the trials that reported using that version."""
    return _metrics_of(db, "model_version_id = :v", group, kind, v=version_id)
