"""Checkpoint storage on a (possibly network-) shared file system."""
import contextlib
import errno
import logging
import os
import pathlib
import re
import shutil
import stat
import uuid
from typing import Iterator

from determined import errors
from determined.storage import _safe_tree
from determined.storage._base import StorageManager

logger = logging.getLogger("determined.storage")

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
    real_src = os.path.realpath(src)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = pathlib.Path(dirpath).relative_to(src)
        target_dir = dst / rel
        for name in [*dirnames, *filenames]:
            link = os.path.join(dirpath, name)
            if os.path.islink(link) and _inside(os.path.realpath(link), real_src):  # kept a link, as read_files
                os.symlink(os.readlink(link), target_dir / name)
        dirnames[:] = [d for d in dirnames if not (target_dir / d).is_symlink()]
        filenames = [f for f in filenames if not (target_dir / f).is_symlink()]
        for d in dirnames:
            (target_dir / d).mkdir()
        for name in filenames:
            target = target_dir / name
            shutil.copyfile(pathlib.Path(dirpath) / name, target)
            with open(target, "rb+") as f:
                os.fsync(f.fileno())
        _fsync_dir(target_dir)


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


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
        """Copy the checkpoint into `dst_dir`: its files and directories, and its links that stay inside it (as
        links); a link leading out of it is left out, with a warning, never copied as what it points at."""
        skipped = self.copy_files(storage_id, dst_dir, completed=completed)
        if skipped:
            logger.warning("checkpoint %s: %s", storage_id, _safe_tree.describe_skipped(skipped))

    def read_files(self, storage_id: str, *, completed: bool = False) -> Iterator[_safe_tree.Entry]:
        """The checkpoint's entries read in place (no copy), without following a link: a checkpoint directory
        that is itself a link is refused (LinkedCheckpoint)."""
        base = self._open_base(reading=storage_id)
        try:
            top = _safe_tree.open_checkpoint_dir(base, _check_id(storage_id), str(self.path_of(storage_id)))
        finally:
            os.close(base)
        try:
            yield from _safe_tree.read_tree(top)
        finally:
            os.close(top)

    def delete(self, storage_id: str) -> None:
        """Remove `<base>/<id>`: renamed aside first (a half-deleted checkpoint never stays under its id), then
        removed without following links; reached from the storage directory opened without following links, so
        a link planted at the checkpoint or above it is never deleted through."""
        path = self.path_of(storage_id)
        try:
            base = self._open_base()
        except errors.DeterminedError:
            if not os.path.lexists(self.base_path):
                return  # no storage directory: nothing stored
            raise
        try:
            try:
                st = os.stat(storage_id, dir_fd=base, follow_symlinks=False)
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(st.st_mode):  # never written by this storage: planted, its target not ours to delete
                raise _safe_tree.LinkedCheckpoint(
                    f"not deleting checkpoint {storage_id}: {path} is a symbolic link or a file, not a checkpoint "
                    "directory")
            trash = f"{_TRASH_PREFIX}{storage_id}-{uuid.uuid4().hex[:8]}"
            os.rename(storage_id, trash, src_dir_fd=base, dst_dir_fd=base)
            if stat.S_ISLNK(os.stat(trash, dir_fd=base, follow_symlinks=False).st_mode):  # swapped in meanwhile
                os.unlink(trash, dir_fd=base)
                raise _safe_tree.LinkedCheckpoint(
                    f"not deleting checkpoint {storage_id}: {path} became a symbolic link while it was deleted; "
                    "the link was removed, not what it points at")
            shutil.rmtree(trash, dir_fd=base, ignore_errors=True)
        finally:
            os.close(base)

    def exists(self, storage_id: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(self.path_of(storage_id)).st_mode)
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def restore_path(self, storage_id: str, *, completed: bool = False) -> Iterator[pathlib.Path]:
        """The stored directory itself: shared storage needs no copy to be read (a link there is refused)."""
        yield self._existing(storage_id)

    def _open_base(self, reading: str = "") -> int:
        """The storage directory's descriptor, opened without following links; `reading`: the id of the
        checkpoint read (a missing storage directory then means a missing checkpoint)."""
        try:
            return _safe_tree.open_dir_nofollow(self.base_path)
        except OSError as e:
            if reading and e.errno == errno.ENOENT:
                raise errors.DeterminedError(
                    f"checkpoint {reading} is not in storage (looked for {self.path_of(reading)})") from None
            raise errors.DeterminedError(
                f"cannot open the checkpoint storage directory {self.base_path} ({e.strerror}): it is missing, or a "
                "part of it became a symbolic link since the storage was set up; nothing there is read or deleted"
            ) from None

    def _existing(self, storage_id: str) -> pathlib.Path:
        path = self.path_of(storage_id)
        base = self._open_base(reading=storage_id)
        try:
            os.close(_safe_tree.open_checkpoint_dir(base, storage_id, str(path)))
        finally:
            os.close(base)
        return path
