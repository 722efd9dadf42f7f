"""Deleting a checkpoint, or some of its files (0.38's `Checkpoint.delete()`/`remove_files(globs)`, `det checkpoint
rm`): the owner of its experiment or an admin; never a checkpoint the model registry holds."""
import fnmatch
import logging
import pathlib
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Dict, List

from determined import errors
from determined.master.security import auth
from determined.master.storage import gc
from determined.master.registry import model_registry
from determined.master.lifecycle import states
from determined.master.db import Experiment
from determined.master.problems import RequestProblem
from determined.master.storage.storage_roots import is_checkpoint_uuid
from determined.master.storage.access import storage_manager
from determined.storage._base import directory_resources
from determined.storage._safe_tree import LinkedCheckpoint, describe_skipped

if TYPE_CHECKING:
    from determined.master.master import Master

logger = logging.getLogger("determined.master")

MAX_GLOBS = 100


def _deletable(master: "Master", uuid: str, principal: auth.Principal, what: str) -> Dict[str, Any]:
    """The checkpoint's experiment id and storage, after the checks every deletion makes."""
    with master.read() as s:
        ckpt = model_registry.get_checkpoint(s, uuid)
        exp = s.get(Experiment, ckpt.experiment_id)
        auth.check_checkpoint_owner(principal, exp, uuid, what)
        if model_registry.registered_uuids(s, [uuid]):
            raise RequestProblem(400, f"checkpoint {uuid} is a version in the model registry "
                                      f"({', '.join(v['model_name'] + ' v' + str(v['version']) for v in _versions(s, uuid))})"
                                      "; delete those model versions first")
        if ckpt.state not in (states.COMPLETED, gc.PARTIALLY_DELETED):
            raise RequestProblem(400, f"checkpoint {uuid} is {ckpt.state}; only COMPLETED or PARTIALLY_DELETED "
                                      "checkpoints have files to delete")
        if exp is not None and exp.state not in states.EXPERIMENT_TERMINAL:
            raise RequestProblem(400, f"checkpoint {uuid} belongs to experiment {exp.id}, which is {exp.state}; its "
                                      "trials may still restore from it: delete its files once the experiment ended")
        return {"experiment_id": ckpt.experiment_id,
                "storage": (exp.config.get("checkpoint_storage") if exp is not None else None)}


def _versions(s: Any, uuid: str) -> List[Dict[str, Any]]:
    from determined.master.views.serialize import model_versions_of

    return model_versions_of(s, uuid)


def delete_checkpoint(master: "Master", uuid: str, principal: auth.Principal) -> None:
    """Delete every file of the checkpoint; its row stays, DELETED."""
    found = _deletable(master, uuid, principal, "delete")
    deleted = gc.delete_stored(master, found["experiment_id"], found["storage"], [uuid], "checkpoint deletion",
                               raise_errors=True)
    if not deleted:
        raise RequestProblem(409, f"checkpoint {uuid} changed meanwhile (registered, or started from); nothing "
                                  "was deleted")


def check_globs(body: Any) -> List[str]:
    fields = model_registry.check_body(body, ("globs",), "checkpoint file removal")
    globs = fields.get("globs")
    if (not isinstance(globs, list) or not globs or len(globs) > MAX_GLOBS
            or not all(isinstance(g, str) and g.strip() and len(g) <= 1024 for g in globs)):
        raise RequestProblem(400, "invalid checkpoint file removal", [
            f"globs: expected a list of 1 to {MAX_GLOBS} glob patterns of the checkpoint's files, e.g. [\"*.pt\"]"])
    return globs


def _matches(path: str, globs: List[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, g) or fnmatch.fnmatchcase(path, g.rstrip("/") + "/*") for g in globs)


def remove_files(master: "Master", uuid: str, body: Any, principal: auth.Principal) -> Dict[str, Any]:
    """Remove the checkpoint's files that match any of `globs` (relative paths; `*` crosses directories): the row
    becomes PARTIALLY_DELETED with the files left, or DELETED when none is left. Returns what was removed.

    The files left are copied aside and stored again, as the storage reads them without following links: a link
    inside the checkpoint that leads out of it is dropped (named in `skipped_links`, and logged), never copied as
    what it points at; a link that stays inside stays a link."""
    globs = check_globs(body)
    found = _deletable(master, uuid, principal, "delete files of")
    if not is_checkpoint_uuid(uuid):
        raise RequestProblem(400, f"checkpoint {uuid!r} has an id that is not a UUID; its files cannot be changed")
    refusal = master.storage_refusal(found["storage"])
    if refusal:
        raise RequestProblem(400, f"nothing is deleted: {refusal}")
    storage = storage_manager(master, found["storage"])
    staging = pathlib.Path(tempfile.mkdtemp(prefix="det-remove-files-"))
    try:
        with master.lock:
            # its record was checked by _deletable; links leading out of it are not copied, nor kept
            try:
                left_out = storage.copy_files(uuid, str(staging), completed=True)
            except LinkedCheckpoint as e:
                raise RequestProblem(409, str(e)) from None
            except errors.DeterminedError as e:
                raise RequestProblem(502, f"the files of checkpoint {uuid} cannot be read: {e}") from None
            before = directory_resources(str(staging))
            removed = [p for p in before if not p.endswith("/") and _matches(p, globs)]
            if not removed:  # nothing changes
                return {"removed": [], "state": _state_of(master, uuid), "skipped_links": []}
            skipped = [e.path for e in left_out]
            if left_out:
                logger.warning("checkpoint %s: remove_files %s", uuid, describe_skipped(left_out))
            for rel in removed:
                (staging / rel).unlink()
            kept = {p: n for p, n in directory_resources(str(staging)).items() if not p.endswith("/")}
            if kept:
                storage.delete(uuid)
                storage.upload(str(staging), uuid)
            else:
                storage.delete(uuid)
            with master.write() as s:
                ckpt = model_registry.get_checkpoint(s, uuid)
                ckpt.resources = kept
                ckpt.state = gc.PARTIALLY_DELETED if kept else states.DELETED
                state = ckpt.state
        return {"removed": removed, "state": state, "skipped_links": skipped}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _state_of(master: "Master", uuid: str) -> str:
    with master.read() as s:
        return model_registry.get_checkpoint(s, uuid).state
