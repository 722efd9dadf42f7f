"""Checkpoint storage on a (possibly network-) shared file system."""
import contextlib
import os
import pathlib
import re
import shutil
import uuid
from typing import Iterator

from determined import errors
from determined.storage._base import StorageManager

_STAGING_PREFIX = ".staging-"
_TRASH_PREFIX = ".deleting-"
_VALID_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_id(storage_id: str) -> str:
    if not isinstance(storage_id, str) or not _VALID_ID.match(storage_id):
        raise errors.DeterminedError(
            f"invalid checkpoint storage id {storage_id!r}: use letters, digits, '.', '_' or '-' "
            "(a uuid, usually), starting with a letter or digit"
        )
    return storage_id


def _fsync_dir(path: pathlib.Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(root: pathlib.Path) -> None:
    """fsync every file and directory under `root` (files written by someone else, e.g. torch.save)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(pathlib.Path(dirpath))


def _copy_tree_synced(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Copy `src` into the new directory `dst`, fsyncing every file and directory written."""
    dst.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = pathlib.Path(dirpath).relative_to(src)
        target_dir = dst / rel
        for d in dirnames:
            (target_dir / d).mkdir()
        for name in filenames:
            target = target_dir / name
            shutil.copyfile(pathlib.Path(dirpath) / name, target)
            with open(target, "rb+") as f:
                os.fsync(f.fileno())
        _fsync_dir(target_dir)


class SharedFSStorageManager(StorageManager):
    """Stores checkpoint `<id>` as the directory `<base_path>/<id>`.

    Uploads are copied into a hidden staging directory next to their destination (same file system),
    every file is fsynced, and the staging directory is renamed into place: a crash at any point leaves
    no directory named by the id with missing files.
    """

    def __init__(self, base_path: str) -> None:
        self.base_path = pathlib.Path(base_path).expanduser().resolve()

    def __repr__(self) -> str:
        return f"SharedFSStorageManager({str(self.base_path)!r})"

    def path_of(self, storage_id: str) -> pathlib.Path:
        return self.base_path / _check_id(storage_id)

    def upload(self, src_dir: str, storage_id: str) -> None:
        src = pathlib.Path(src_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot upload checkpoint {storage_id}: {src_dir!r} is not a directory")
        final, staging = self._staging_for(storage_id)
        try:
            _copy_tree_synced(src, staging)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(self.base_path)

    def add_files(self, src_dir: str, storage_id: str) -> None:
        src = pathlib.Path(src_dir)
        if not src.is_dir():
            raise errors.DeterminedError(f"cannot add files to {storage_id}: {src_dir!r} is not a directory")
        final = self.path_of(storage_id)
        for dirpath, _dirnames, filenames in os.walk(src):
            target_dir = final / pathlib.Path(dirpath).relative_to(src)
            target_dir.mkdir(parents=True, exist_ok=True)
            for name in filenames:
                # Copied beside its destination, fsynced, then renamed over it: a reader never sees half a file.
                partial = target_dir / f"{_STAGING_PREFIX}{name}-{uuid.uuid4().hex[:8]}"
                shutil.copyfile(pathlib.Path(dirpath) / name, partial)
                with open(partial, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(partial, target_dir / name)
            _fsync_dir(target_dir)

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """A staging directory inside the storage: the files are written once, then fsynced and renamed."""
        final, staging = self._staging_for(storage_id)
        try:
            staging.mkdir()
            yield staging
            _fsync_tree(staging)
            os.rename(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(self.base_path)

    def _staging_for(self, storage_id: str) -> "tuple[pathlib.Path, pathlib.Path]":
        final = self.path_of(storage_id)
        if final.exists():
            raise errors.DeterminedError(
                f"checkpoint {storage_id} already exists at {final}; every checkpoint needs a new uuid"
            )
        try:
            self.base_path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise errors.DeterminedError(
                f"cannot create the checkpoint storage directory {self.base_path}: {e}; "
                "check checkpoint_storage.host_path and storage_path"
            ) from None
        return final, self.base_path / f"{_STAGING_PREFIX}{storage_id}-{uuid.uuid4().hex[:8]}"

    def download(self, storage_id: str, dst_dir: str, *, completed: bool = False) -> None:
        src = self._existing(storage_id)
        shutil.copytree(src, dst_dir, dirs_exist_ok=True)

    def delete(self, storage_id: str) -> None:
        path = self.path_of(storage_id)
        if path.is_symlink():  # never written by this storage: planted, and its target is not ours to delete
            raise errors.DeterminedError(
                f"not deleting checkpoint {storage_id}: {path} is a symbolic link, not a checkpoint directory")
        if not path.exists():
            return
        # Rename first so that a half-deleted checkpoint never stays under its uuid.
        trash = self.base_path / f"{_TRASH_PREFIX}{storage_id}-{uuid.uuid4().hex[:8]}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)

    def exists(self, storage_id: str) -> bool:
        return self.path_of(storage_id).is_dir()

    @contextlib.contextmanager
    def restore_path(self, storage_id: str, *, completed: bool = False) -> Iterator[pathlib.Path]:
        """The stored directory itself: shared storage needs no copy to be read."""
        yield self._existing(storage_id)

    def _existing(self, storage_id: str) -> pathlib.Path:
        path = self.path_of(storage_id)
        if not path.is_dir():
            raise errors.DeterminedError(f"checkpoint {storage_id} is not in storage (looked for {path})")
        return path
