"""How the master reaches a user's checkpoint storage: with the experiment's own credentials only, and never
through a symbolic link a trial planted.

Every route and job of the master that reads or deletes checkpoint files (GC, `DELETE /checkpoints/{uuid}`,
`remove_files`, `GET /checkpoints/{uuid}/files`) builds its storage manager here. On a server an s3 storage
without keys gets unsigned requests, never the master's own AWS credentials (its environment, ~/.aws, an instance
role), and its endpoint passed Master.storage_problems (storage_endpoints.py) just before. A checkpoint reported
into a `shared_fs` or `directory` storage must be a directory there, not a link (`reported_problem`).
"""
import os
import stat
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from sqlalchemy.orm import Session

from determined import errors
from determined.master.db import Experiment, Trial
from determined.master.problems import RequestProblem
from determined.master.storage.storage_roots import is_checkpoint_uuid, storage_directory
from determined.storage import StorageManager, build_storage_manager

if TYPE_CHECKING:
    from determined.master.master import Master


def storage_manager(master: "Master", storage_config: Optional[Mapping[str, Any]]) -> StorageManager:
    """The manager the master uses for an experiment's storage (on a server: no credentials of its own)."""
    return build_storage_manager(storage_config, default_credentials=master.storage_roots is None)


def reported_problem(master: "Master", storage_config: Optional[Mapping[str, Any]], uuid: str) -> Optional[str]:
    """Why a trial may not report checkpoint `uuid` of this storage (None: it may): on a server the storage must
    still pass the master's checks (a link may have been planted above it since submission); in a file storage
    `<dir>/<uuid>`, when the master sees it, must be a directory, not a link to one or anything else."""
    if not storage_config or storage_config.get("type") not in ("shared_fs", "directory", "s3"):
        return None
    problems = master.storage_problems(dict(storage_config))
    if problems:
        return "; ".join(problems)
    if storage_config.get("type") == "s3":
        return None
    try:
        path = os.path.join(storage_directory(storage_config), uuid)
        st = os.lstat(path)
    except (OSError, errors.DeterminedError):  # not visible here (another node's storage): checked when read
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a directory"
    return (f"checkpoint {uuid}: {path} is {what}; a checkpoint is a directory its trial wrote into the storage "
            "(determined.core's CheckpointContext.store_path/upload), and the master never follows a link there")


def check_reported(master: "Master", s: Session, trial: Trial, body: Mapping[str, Any]) -> None:
    """Raise a 400 when the checkpoint a trial reports is refused by `reported_problem`."""
    uuid = body.get("uuid")
    if not is_checkpoint_uuid(uuid):
        return  # protocol.report_checkpoint refuses it with its own message
    exp = s.get(Experiment, trial.experiment_id)
    storage: Dict[str, Any] = dict((exp.config or {}).get("checkpoint_storage") or {}) if exp is not None else {}
    problem = reported_problem(master, storage, uuid)
    if problem:
        raise RequestProblem(400, f"checkpoint {uuid} is refused: {problem}")


__all__ = ["check_reported", "reported_problem", "storage_manager"]
