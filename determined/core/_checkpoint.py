"""Storing, reporting and restoring checkpoints."""
import contextlib
import logging
import pathlib
import uuid as uuid_mod
from typing import Any, Dict, Iterator, List, Optional, Tuple

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext
from determined.storage import StorageManager, directory_resources

logger = logging.getLogger("determined.core")


class CheckpointContext:
    """Writes checkpoints through a storage backend and reports them once every file is stored.

    Checkpoint metadata holds `steps_completed` (required), `framework`, `format`, and anything else the
    caller adds (kept in the checkpoint's `metadata`). Without a master, reported checkpoints are kept in
    `reported` (the bodies that would have been posted).
    """

    def __init__(
        self,
        storage_manager: StorageManager,
        session: Optional[Session],
        trial_id: int,
        distributed: DistributedContext,
    ) -> None:
        self._storage = storage_manager
        self._session = session
        self._trial_id = trial_id
        self._distributed = distributed
        self.reported: List[Dict[str, Any]] = []

    @property
    def storage_manager(self) -> StorageManager:
        return self._storage

    @contextlib.contextmanager
    def store_path(self, metadata: Optional[Dict[str, Any]] = None) -> Iterator[Tuple[pathlib.Path, str]]:
        """Yield `(path, uuid)`: write the checkpoint's files under `path`; on exit they are uploaded and reported.

        If the body raises, nothing is uploaded or reported.
        """
        self._require_chief("store_path")
        meta = _check_metadata(metadata)
        storage_id = str(uuid_mod.uuid4())
        with self._storage.store_path(storage_id) as path:
            yield path, storage_id
            resources = directory_resources(str(path))
        self._report(storage_id, resources, meta)

    def upload(self, ckpt_dir: str, metadata: Optional[Dict[str, Any]] = None) -> str:
        """Store the files of the directory `ckpt_dir` as a new checkpoint and report it; returns its uuid."""
        self._require_chief("upload")
        meta = _check_metadata(metadata)
        src = pathlib.Path(ckpt_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot upload checkpoint: {ckpt_dir!r} is not a directory")
        storage_id = str(uuid_mod.uuid4())
        self._upload_and_report(src, storage_id, meta)
        return storage_id

    def download(self, storage_id: str, dst: str) -> None:
        """Copy the checkpoint `storage_id` into the directory `dst`."""
        self._storage.download(storage_id, dst)

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a local directory with the checkpoint's files (read-only use, valid inside the context)."""
        with self._storage.restore_path(storage_id) as path:
            yield pathlib.Path(path)

    def _upload_and_report(self, src: pathlib.Path, storage_id: str, meta: Dict[str, Any]) -> None:
        resources = directory_resources(str(src))
        self._storage.upload(str(src), storage_id)
        self._report(storage_id, resources, meta)

    def _report(self, storage_id: str, resources: Dict[str, int], meta: Dict[str, Any]) -> None:
        body = {
            "uuid": storage_id,
            "steps_completed": meta["steps_completed"],
            "resources": resources,
            "framework": meta.get("framework", ""),
            "format": meta.get("format", ""),
            "metadata": meta,
        }
        if self._session is None:
            logger.info(
                "checkpoint %s stored after %d batches (%d files)",
                storage_id,
                meta["steps_completed"],
                sum(1 for k in resources if not k.endswith("/")),
            )
            self.reported.append(body)
            return
        try:
            self._session.post(f"/trials/{self._trial_id}/checkpoints", json=body)
        except Exception:
            # The master does not know this checkpoint: do not leave its files behind.
            self._storage.delete(storage_id)
            raise

    def _require_chief(self, what: str) -> None:
        if self._distributed.rank != 0:
            raise errors.DeterminedError(
                f"CheckpointContext.{what}() is for the chief (rank 0) only; this is rank {self._distributed.rank}"
            )


def _check_metadata(metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    meta = dict(metadata or {})
    steps = meta.get("steps_completed")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise errors.DeterminedError(
            "checkpoint metadata needs 'steps_completed': the number of batches trained (an int >= 0), "
            f"got {steps!r}"
        )
    return meta
