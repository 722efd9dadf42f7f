"""The model registry: named models whose versions point at checkpoints; checkpoint lookup and metadata.

Every function works inside the caller's transaction and raises RequestProblem before it changes anything,
so a refused request stores nothing.
"""
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from determined.master.security import auth
from determined.master.registry import names
from determined.master.registry.fields import (MAX_METADATA_BYTES, _json_type, check_body, check_description,
                                               check_metadata, check_metadata_size, check_name)
from determined.master.lifecycle import states
from determined.master.db import Checkpoint, Experiment, User, utcnow
from determined.master.db.models import Model, ModelVersion, TrialSourceInfo
from determined.master.problems import RequestProblem
from determined.master.views.reads import order_of
from determined.master.security.request_limits import clip_repr

# ---------------------------------------------------------------- models


def get_model(s: Session, name: str) -> Model:
    model = s.scalars(select(Model).where(Model.name == name)).first()
    if model is None:
        raise RequestProblem(404, f"model {name!r} not found")
    return model


def create_model(s: Session, name: str, body: Any, owner: Optional[auth.Principal] = None) -> Model:
    """A new model owned by `owner` (a user; None: nobody but admins may change it); 409 when the name is taken."""
    fields = check_body(body, ("description", "metadata", "workspace_id"), "model")
    name = check_name(name)
    description = check_description("" if fields.get("description") is None else fields["description"])
    metadata = check_metadata({} if fields.get("metadata") is None else fields["metadata"])
    workspace_id = _workspace_for_model(s, fields.get("workspace_id"))
    if s.scalars(select(Model.id).where(Model.name == name)).first() is not None:
        raise RequestProblem(409, f"model {name!r} already exists; choose another name, or change it with PATCH /models/{name}")
    now = utcnow()
    model = Model(name=name, description=description, metadata_=metadata, creation_time=now, last_updated_time=now,
                  owner=owner.username if owner is not None else "", owner_id=owner.user_id if owner is not None else None,
                  workspace_id=workspace_id)
    s.add(model)
    s.flush()
    return model


def update_model(s: Session, name: str, body: Any, principal: auth.Principal) -> Model:
    """Replace the description and/or the whole metadata object of a model (its owner or an admin); an admin may
    also hand it to another user (`owner`)."""
    fields = check_body(body, ("description", "metadata", "owner", "workspace_id", "labels", "archived"),
                        "model update")
    model = get_model(s, name)
    auth.check_model_owner(principal, model)
    description = check_description(fields["description"]) if "description" in fields else None
    metadata = check_metadata(fields["metadata"]) if "metadata" in fields else None
    new_owner = _new_owner(s, principal, fields["owner"]) if "owner" in fields else None
    if "workspace_id" in fields:  # a move (`det model move`, Model.move_to_workspace)
        model.workspace_id = _workspace_for_model(s, fields["workspace_id"])
    if "labels" in fields:
        problems = names.label_problems(fields["labels"]) if fields["labels"] is not None else ["labels: expected a list"]
        if problems:
            raise RequestProblem(400, "invalid model update", problems)
        model.labels = list(dict.fromkeys(fields["labels"]))
    if "archived" in fields:
        if not isinstance(fields["archived"], bool):
            raise RequestProblem(400, "invalid model update", ["archived: expected true or false"])
        model.archived = fields["archived"]
    if description is not None:
        model.description = description
    if metadata is not None:
        model.metadata_ = metadata
    if new_owner is not None:
        model.owner, model.owner_id = new_owner.username, new_owner.id
    if fields:
        model.last_updated_time = utcnow()
    s.flush()
    return model


def _workspace_for_model(s: Session, workspace_id: Any) -> int:
    """The workspace a model goes to (default: Uncategorized); an archived one takes no models."""
    from determined.master.registry import workspaces

    if workspace_id is None:
        return workspaces.DEFAULT_ID
    if isinstance(workspace_id, bool) or not isinstance(workspace_id, int):
        raise RequestProblem(400, "invalid model", [f"workspace_id: expected a workspace's id (an integer), got "
                                                    f"{clip_repr(workspace_id, 60)}"])
    ws = workspaces.get_workspace(s, workspace_id)
    if ws.archived:
        raise RequestProblem(400, f"workspace {ws.name!r} is archived and takes no models; unarchive it first")
    return ws.id


def _new_owner(s: Session, principal: auth.Principal, username: Any) -> User:
    auth.check_admin(principal, "hand a model to another user")
    user = s.scalars(select(User).where(User.username == username)).first() if isinstance(username, str) else None
    if user is None:
        raise RequestProblem(400, "invalid model update", [
            f"owner: {clip_repr(username, 80)} is not a user; `det user list` shows the users"])
    return user


def _order(order_by: str) -> str:
    return order_of(order_by)


# ---------------------------------------------------------------- versions


def versions_of(s: Session, model: Model, order_by: str = "desc") -> List[ModelVersion]:
    order = _order(order_by)
    key = ModelVersion.version if order == "asc" else ModelVersion.version.desc()
    return list(s.scalars(select(ModelVersion).where(ModelVersion.model_id == model.id).order_by(key)))


def get_version(s: Session, model: Model, version: int) -> ModelVersion:
    row = s.scalars(select(ModelVersion).where(ModelVersion.model_id == model.id, ModelVersion.version == version)).first()
    if row is None:
        latest = s.scalar(select(func.max(ModelVersion.version)).where(ModelVersion.model_id == model.id))
        known = f"versions are 1 to {latest}" if latest else "it has no versions yet"
        raise RequestProblem(404, f"version {version} of model {model.name!r} not found; {known}")
    return row


def register_version(s: Session, model: Model, body: Any, principal: auth.Principal) -> ModelVersion:
    """Register a COMPLETED checkpoint as the model's next version (1, 2, ...): its owner or an admin."""
    auth.check_model_owner(principal, model, "add versions to")
    fields = check_body(body, ("checkpoint_uuid",), "model version")
    uuid = fields.get("checkpoint_uuid")
    if not isinstance(uuid, str) or not uuid:
        raise RequestProblem(400, "invalid model version",
                             ["checkpoint_uuid: required, the uuid of a COMPLETED checkpoint"])
    ckpt = get_checkpoint(s, uuid)
    _check_may_register(principal, s.get(Experiment, ckpt.experiment_id), uuid)
    if ckpt.state != states.COMPLETED:
        raise RequestProblem(400, f"checkpoint {uuid} is {ckpt.state}; only a COMPLETED checkpoint can be registered",
                             [f"checkpoint_uuid: checkpoint {uuid} is {ckpt.state}, not COMPLETED"])
    latest = s.scalar(select(func.max(ModelVersion.version)).where(ModelVersion.model_id == model.id)) or 0
    now = utcnow()
    row = ModelVersion(model_id=model.id, version=latest + 1, checkpoint_uuid=uuid, creation_time=now)
    s.add(row)
    model.last_updated_time = now
    s.flush()
    return row


def _check_may_register(principal: auth.Principal, exp: Optional[Experiment], uuid: str) -> None:
    """A registered checkpoint keeps its experiment from being deleted (experiment_edits.delete_experiment, as in
    Determined): so only who may delete that experiment (its owner or an admin) may register its checkpoints."""
    owner = exp.owner if exp is not None else ""
    if principal.admin or (owner and principal.username == owner):
        return
    of = f" of experiment {exp.id}" if exp is not None else ""
    raise RequestProblem(403, f"checkpoint {uuid}{of} is owned by {owner or 'an admin'!r}; only its owner or an admin "
                              f"may register it in a model (you are {principal.username!r}), since a registered "
                              "checkpoint keeps its experiment from being deleted; ask its owner or an admin to "
                              "register it")


VERSION_TEXT_LIMIT = 64 * 1024


def update_version(s: Session, model: Model, version: int, body: Any, principal: auth.Principal) -> ModelVersion:
    """Change a version's `name`, `comment`, `notes` or `metadata` (the model's owner or an admin)."""
    fields = check_body(body, ("name", "comment", "notes", "metadata"), "model version update")
    auth.check_model_owner(principal, model, "change versions of")
    row = get_version(s, model, version)
    problems = []
    if "name" in fields:
        problem = names.name_problem(fields["name"], slashes=True)
        problems += [f"name: {problem}"] if problem else []
    for key in ("comment", "notes"):
        if key in fields:
            problem = names.description_problem(fields[key], key)
            if problem is None and len(fields[key]) > VERSION_TEXT_LIMIT:
                problem = f"{key}: at most {VERSION_TEXT_LIMIT} characters are allowed"
            problems += [problem] if problem else []
    if problems:
        raise RequestProblem(400, "invalid model version update", problems)
    metadata = check_metadata(fields["metadata"]) if "metadata" in fields else None
    for key in ("name", "comment", "notes"):
        if key in fields:
            setattr(row, key, fields[key])
    if metadata is not None:
        row.metadata_ = metadata
    model.last_updated_time = utcnow()
    s.flush()
    return row


def delete_version(s: Session, model: Model, version: int, principal: auth.Principal) -> None:
    """Remove a version from the model (its checkpoint stays; numbers of the others do not change)."""
    auth.check_model_owner(principal, model, "delete versions of")
    row = get_version(s, model, version)
    _forget_versions(s, [row.id])
    s.delete(row)
    model.last_updated_time = utcnow()


def delete_model(s: Session, model: Model, principal: auth.Principal) -> None:
    """Delete a model and its versions (their checkpoints stay)."""
    auth.check_model_owner(principal, model, "delete")
    _forget_versions(s, [row.id for row in versions_of(s, model)])
    for row in versions_of(s, model):
        s.delete(row)
    s.flush()
    s.delete(model)


# ---------------------------------------------------------------- checkpoints


def get_checkpoint(s: Session, uuid: str) -> Checkpoint:
    ckpt = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
    if ckpt is None:
        raise RequestProblem(404, f"checkpoint {uuid} not found")
    return ckpt


def registered_uuids(s: Session, uuids: Optional[Iterable[str]] = None) -> Set[str]:
    """The checkpoint uuids (among `uuids`, or all) that some model version points at."""
    query = select(ModelVersion.checkpoint_uuid).distinct()
    if uuids is not None:
        query = query.where(ModelVersion.checkpoint_uuid.in_(list(uuids)))
    return set(s.scalars(query))


def add_checkpoint_metadata(s: Session, uuid: str, body: Any, principal: auth.Principal) -> Checkpoint:
    """Merge `body["metadata"]` into the checkpoint's metadata (top-level keys replaced): the owner of its
    experiment or an admin."""
    fields = check_body(body, ("metadata",), "checkpoint metadata")
    if "metadata" not in fields:
        raise RequestProblem(400, "invalid checkpoint metadata", ["metadata: required, a JSON object of keys to set"])
    metadata = check_metadata(fields["metadata"])
    ckpt = _own_checkpoint(s, uuid, principal, "change the metadata of")
    merged = {**(ckpt.metadata_ or {}), **metadata}
    check_metadata_size(merged)
    ckpt.metadata_ = merged
    s.flush()
    return ckpt


def remove_checkpoint_metadata(s: Session, uuid: str, keys: Iterable[str], principal: auth.Principal) -> Checkpoint:
    """Remove top-level keys from the checkpoint's metadata (missing keys are ignored): the owner of its experiment
    or an admin."""
    ckpt = _own_checkpoint(s, uuid, principal, "change the metadata of")
    drop = set(keys)
    ckpt.metadata_ = {k: v for k, v in (ckpt.metadata_ or {}).items() if k not in drop}
    s.flush()
    return ckpt


def _own_checkpoint(s: Session, uuid: str, principal: auth.Principal, what: str) -> Checkpoint:
    ckpt = get_checkpoint(s, uuid)
    auth.check_checkpoint_owner(principal, s.get(Experiment, ckpt.experiment_id), uuid, what)
    return ckpt


def _forget_versions(s: Session, version_ids: List[int]) -> None:
    """Before model versions are deleted: trial source infos that named them stay, as links to their checkpoints."""
    if version_ids:
        s.execute(update(TrialSourceInfo).where(TrialSourceInfo.model_version_id.in_(version_ids))
                  .values(model_version_id=None))
