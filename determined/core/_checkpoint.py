"""Storing, reporting, restoring and deleting checkpoints (Determined 0.38's `CheckpointContext`)."""
import contextlib
import enum
import hashlib
import json
import logging
import os
import pathlib
import shutil
import tempfile
import uuid as uuid_mod
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from determined import errors
from determined.common.api import Session
from determined.core._distributed import DistributedContext
from determined.storage import StorageManager, directory_resources

logger = logging.getLogger("determined.core")

METADATA_FILE = "metadata.json"
Selector = Callable[[str], bool]


class DownloadMode(enum.Enum):
    """How the ranks of a machine get a checkpoint's files: the local chief downloads them once for all
    (`LocalWorkersShareDownload`, collective per machine), or every rank on its own (`NoSharedDownload`)."""

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


class CheckpointContext:
    """Writes checkpoints through a storage backend and reports them once every file is stored.

    A checkpoint holds its files and `metadata.json` (the metadata dict). Inside a trial, metadata must hold
    `steps_completed` (the batches trained: where a restart resumes); `framework`, `format` and anything else the
    caller adds are kept in the checkpoint's `metadata`. Checkpoint ids are new UUID4s. Without a master, reported
    checkpoints are kept in `reported` (the bodies that would have been posted).
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

    # -- storing ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def store_path(
        self, metadata: Optional[Dict[str, Any]] = None, *, shard: bool = False
    ) -> Iterator[Tuple[pathlib.Path, str]]:
        """Yield `(path, storage_id)`: write the checkpoint's files under `path`; on exit they are stored and the
        checkpoint is reported. If the body raises, nothing is stored or reported.

        `shard=False`: the chief only. `shard=True`: every rank at once, each into its own `path`; on exit the files
        of all ranks make one checkpoint (a file several ranks wrote identically is kept once; different contents
        under one name are an error), and the ranks' metadata are merged (conflicting values are an error).
        """
        meta = self._check_metadata(metadata)
        if not shard:
            self._require_chief("store_path")
            storage_id = str(uuid_mod.uuid4())
            with self._storage.store_path(storage_id) as path:
                yield path, storage_id
                _write_metadata(path, meta)
                resources = directory_resources(str(path))
            self._report(storage_id, resources, meta)
            return
        storage_id = self._shared_storage_id()
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f"det-shard-{storage_id}-rank{self._distributed.rank}-"))
        try:
            try:
                yield tmp, storage_id
            except BaseException as e:
                self._merge_shards(storage_id, None, meta, None, failure=e)
                raise
            self._merge_shards(storage_id, tmp, meta, None)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def upload(
        self,
        ckpt_dir: Optional[str],
        metadata: Optional[Dict[str, Any]] = None,
        *,
        shard: bool = False,
        selector: Optional[Selector] = None,
    ) -> str:
        """Store the files of the directory `ckpt_dir` as a new checkpoint and report it; returns its storage id.

        `selector(relative path) -> bool` picks the files. With `shard=True` every rank calls it at once with its
        own directory (or None: nothing from this rank), merged as in `store_path`.
        """
        meta = self._check_metadata(metadata)
        if shard:
            storage_id = self._shared_storage_id()
            src = self._check_dir(ckpt_dir) if ckpt_dir is not None else None
            self._merge_shards(storage_id, src, meta, selector)
            return storage_id
        self._require_chief("upload")
        if ckpt_dir is None:
            raise errors.DeterminedError("upload(ckpt_dir=None) is only for shard=True (a rank with no files)")
        src = self._check_dir(ckpt_dir)
        storage_id = str(uuid_mod.uuid4())
        with self._storage.store_path(storage_id) as path:
            _copy_selected(src, path, selector)
            _write_metadata(path, meta)
            resources = directory_resources(str(path))
        self._report(storage_id, resources, meta)
        return storage_id

    # -- restoring -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Optional[Selector] = None,
    ) -> Iterator[pathlib.Path]:
        """Yield a local directory with the checkpoint's files (read them only inside the context).

        With `DownloadMode.LocalWorkersShareDownload` (the default) every rank of the machine calls it at once and
        the machine's local chief fetches the files for all; `selector` picks the files to fetch.
        """
        shared = DownloadMode(download_mode) == DownloadMode.LocalWorkersShareDownload
        if not shared or self._distributed.local_size == 1:
            with self._local_restore(storage_id, selector) as path:
                yield path
            return
        if self._distributed.local_rank == 0:
            with contextlib.ExitStack() as stack:
                try:
                    path = stack.enter_context(self._local_restore(storage_id, selector))
                except Exception as e:
                    self._distributed.broadcast_local((None, f"{type(e).__name__}: {e}"))
                    raise
                self._distributed.broadcast_local((str(path), None))
                try:
                    yield path
                finally:
                    self._distributed.allgather_local(None)  # the others are done with the files
            return
        shared_path, problem = self._distributed.broadcast_local(None)
        if shared_path is None:
            raise errors.DeterminedError(f"checkpoint {storage_id} could not be restored on this machine: {problem}")
        try:
            yield pathlib.Path(shared_path)
        finally:
            self._distributed.allgather_local(None)

    def download(
        self,
        storage_id: str,
        ckpt_dir: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Optional[Selector] = None,
    ) -> None:
        """Copy the checkpoint's files (those `selector` picks) into the directory `ckpt_dir`.

        With `DownloadMode.LocalWorkersShareDownload` every rank of the machine calls it at once and only the local
        chief downloads (the others wait for it)."""
        shared = DownloadMode(download_mode) == DownloadMode.LocalWorkersShareDownload
        if shared and self._distributed.local_size > 1 and self._distributed.local_rank != 0:
            self._distributed.allgather_local(None)
            return
        try:
            with self._local_restore(storage_id, selector) as path:
                pathlib.Path(ckpt_dir).mkdir(parents=True, exist_ok=True)
                shutil.copytree(path, ckpt_dir, dirs_exist_ok=True)
        finally:
            if shared and self._distributed.local_size > 1:
                self._distributed.allgather_local(None)

    def get_metadata(self, storage_id: str) -> Dict[str, Any]:
        """The checkpoint's metadata: as the master recorded it, or (without a master) its metadata.json."""
        if self._session is not None:
            checkpoint = (self._session.get(f"/checkpoints/{storage_id}") or {}).get("checkpoint") or {}
            return dict(checkpoint.get("metadata") or {})
        with self._storage.restore_path(storage_id) as path:
            file = pathlib.Path(path) / METADATA_FILE
            return dict(json.loads(file.read_text())) if file.is_file() else {}

    def delete(self, storage_id: str) -> None:
        """Delete a checkpoint of this trial: the master marks it DELETED, then its files are removed."""
        self._require_chief("delete")
        if self._session is not None:
            self._session.delete(f"/trials/{self._trial_id}/checkpoints/{storage_id}")
        else:
            self.reported = [body for body in self.reported if body["uuid"] != storage_id]
        self._storage.delete(storage_id)

    # -- internals -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _local_restore(self, storage_id: str, selector: Optional[Selector]) -> Iterator[pathlib.Path]:
        with self._storage.restore_path(storage_id) as path:
            if selector is None:
                yield pathlib.Path(path)
                return
            tmp = pathlib.Path(tempfile.mkdtemp(prefix=f"det-restore-{storage_id}-"))
            try:
                _copy_selected(pathlib.Path(path), tmp, selector)
                yield tmp
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def _shared_storage_id(self) -> str:
        """A new UUID4 chosen by the chief, the same on every rank (a collective)."""
        return str(self._distributed.broadcast(str(uuid_mod.uuid4()) if self._distributed.rank == 0 else None))

    def _merge_shards(self, storage_id: str, src: Optional[pathlib.Path], meta: Dict[str, Any],
                      selector: Optional[Selector], failure: Optional[BaseException] = None) -> None:
        """Make one checkpoint of the files every rank gives (a collective; see `store_path(shard=True)`).

        Each rank lists its files with their md5; the chief decides who stores which file and builds the checkpoint
        in storage, copying the files of the ranks on its machine from their directories and receiving the others'
        files through the collectives; then it reports the checkpoint and tells every rank the outcome.
        """
        d = self._distributed
        listing = _listing(src, selector) if src is not None and failure is None else {}
        mine = {"ok": failure is None, "files": listing, "metadata": meta, "dir": str(src) if src else None,
                "cross_rank": d.cross_rank}
        everyone: List[Dict[str, Any]] = d.allgather(mine)
        failed = [rank for rank, shard in enumerate(everyone) if not shard["ok"]]
        if failed:
            if failure is not None:
                return  # the caller raises its own error
            raise errors.DeterminedError(f"checkpoint {storage_id} was not stored: rank(s) {failed} failed while "
                                         "writing their shard")
        owners, merged_meta = _plan_shards(everyone)
        # Files of ranks on other machines travel to the chief; the chief's machine shares its temp directories.
        remote = {rel: (src / rel).read_bytes() for rel, owner in owners.items()
                  if owner == d.rank and d.cross_rank != everyone[0]["cross_rank"]} if src is not None else {}
        received = d.gather(remote)
        outcome: Optional[str] = None
        if d.rank == 0:
            try:
                with self._storage.store_path(storage_id) as path:
                    for rel, owner in sorted(owners.items()):
                        target = path / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        if everyone[owner]["cross_rank"] == everyone[0]["cross_rank"]:
                            shutil.copyfile(pathlib.Path(everyone[owner]["dir"]) / rel, target)
                        else:
                            assert received is not None
                            target.write_bytes(received[owner][rel])
                    _write_metadata(path, merged_meta)
                    resources = directory_resources(str(path))
                self._report(storage_id, resources, merged_meta)
            except Exception as e:
                outcome = f"{type(e).__name__}: {e}"
                d.broadcast(outcome)
                raise
        outcome = d.broadcast(outcome)
        if outcome is not None:
            raise errors.DeterminedError(f"checkpoint {storage_id} was not stored: the chief failed ({outcome})")

    def _check_metadata(self, metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
        meta = dict(metadata or {})
        steps = meta.get("steps_completed")
        if steps is None and self._session is None:
            return meta  # off the platform nothing resumes from it: steps_completed is optional (as 0.38)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise errors.DeterminedError(
                "checkpoint metadata needs 'steps_completed': the number of batches trained (an int >= 0), "
                f"got {steps!r}"
            )
        return meta

    @staticmethod
    def _check_dir(ckpt_dir: str) -> pathlib.Path:
        src = pathlib.Path(ckpt_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot upload checkpoint: {ckpt_dir!r} is not a directory")
        return src

    def _report(self, storage_id: str, resources: Dict[str, int], meta: Dict[str, Any]) -> None:
        steps = int(meta.get("steps_completed", 0))
        body = {
            "uuid": storage_id,
            "steps_completed": steps,
            "resources": resources,
            "framework": meta.get("framework", ""),
            "format": meta.get("format", ""),
            "metadata": meta,
        }
        if self._session is None:
            logger.info("checkpoint %s stored after %d steps (%d files) in %s", storage_id, steps,
                        sum(1 for k in resources if not k.endswith("/")), self._storage)
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
                + (" (or use shard=True, where every rank takes part)" if what in ("store_path", "upload") else "")
            )


def _write_metadata(path: pathlib.Path, metadata: Dict[str, Any]) -> None:
    with open(path / METADATA_FILE, "w") as f:
        json.dump(metadata, f, indent=2, sort_keys=True, default=str)


def _copy_selected(src: pathlib.Path, dst: pathlib.Path, selector: Optional[Selector]) -> None:
    """Copy the files of a stored checkpoint that `selector` picks, metadata.json too (as Determined did)."""
    for rel in _listing(src, selector, with_metadata=True):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)


def _listing(src: pathlib.Path, selector: Optional[Selector], with_metadata: bool = False) -> Dict[str, str]:
    """`{relative path: md5}` of the files under `src` that `selector` picks (metadata.json, the platform's, only
    `with_metadata`)."""
    out: Dict[str, str] = {}
    for dirpath, _dirnames, filenames in os.walk(src):
        for name in filenames:
            full = pathlib.Path(dirpath) / name
            rel = full.relative_to(src).as_posix()
            if (rel == METADATA_FILE and not with_metadata) or (selector is not None and not selector(rel)):
                continue
            digest = hashlib.md5()
            with open(full, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            out[rel] = digest.hexdigest()
    return out


def _plan_shards(shards: List[Dict[str, Any]]) -> Tuple[Dict[str, int], Dict[str, Any]]:
    """Who stores each file (the lowest rank that has it) and the merged metadata; conflicts are errors."""
    owners: Dict[str, int] = {}
    digests: Dict[str, str] = {}
    for rank, shard in enumerate(shards):
        for rel, digest in shard["files"].items():
            if rel not in owners:
                owners[rel], digests[rel] = rank, digest
            elif digests[rel] != digest:
                raise errors.DeterminedError(
                    f"checkpoint shards conflict: rank {owners[rel]} and rank {rank} both wrote {rel!r} with "
                    "different contents; give each rank its own file names (e.g. with the rank in them)"
                )
    merged: Dict[str, Any] = {}
    for shard in shards:
        _deep_merge(merged, shard["metadata"], "")
    return owners, merged


def _deep_merge(into: Dict[str, Any], other: Dict[str, Any], path: str) -> None:
    for key, value in other.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in into:
            into[key] = value
        elif isinstance(into[key], dict) and isinstance(value, dict):
            _deep_merge(into[key], value, where)
        elif into[key] != value:
            raise errors.DeterminedError(
                f"checkpoint shards conflict: the ranks' metadata disagree at {where!r} ({into[key]!r} != {value!r})"
            )
