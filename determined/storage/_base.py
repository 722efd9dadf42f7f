"""The interface every checkpoint storage backend implements."""
import abc
import contextlib
import os
import pathlib
import shutil
import tempfile
from typing import Dict, Iterator, List

from determined.storage import _safe_tree


class StorageManager(abc.ABC):
    """Stores checkpoint directories, each named by a storage id (the checkpoint's uuid).

    Implementations make `upload` atomic: a directory named by the id exists in storage only once every
    one of its files is complete.
    """

    @abc.abstractmethod
    def upload(self, src_dir: str, storage_id: str) -> None:
        """Copy the directory `src_dir` into storage under `storage_id`."""

    @abc.abstractmethod
    def download(self, storage_id: str, dst_dir: str, *, completed: bool = False) -> None:
        """Copy the stored directory `storage_id` into `dst_dir` (created if missing). `completed`: the caller has
        checked that the checkpoint's record is COMPLETED, so a checkpoint Determined wrote (without this platform's
        completion marker, see S3StorageManager.download) is read as its storage lists it."""

    @abc.abstractmethod
    def delete(self, storage_id: str) -> None:
        """Remove the stored directory `storage_id`; deleting a missing id is not an error."""

    @abc.abstractmethod
    def exists(self, storage_id: str) -> bool:
        """Whether a complete directory is stored under `storage_id`."""

    @abc.abstractmethod
    def add_files(self, src_dir: str, storage_id: str) -> None:
        """Add the files of `src_dir` to the directory `storage_id` (created when missing), replacing files of the
        same name; unlike `upload`, the id may be used again. Each file lands whole. For outputs that are not
        checkpoints (batch inference results): the directory gets no completeness marker."""

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """A local directory to write the files of `storage_id` into; stored when the context exits cleanly.

        If the body raises, nothing is stored.
        """
        tmp = tempfile.mkdtemp(prefix=f"det-store-{storage_id}-")
        try:
            yield pathlib.Path(tmp)
            self.upload(tmp, storage_id)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @contextlib.contextmanager
    def restore_path(self, storage_id: str, *, completed: bool = False) -> Iterator[pathlib.Path]:
        """A local directory holding the stored files, for reading only while the context is open (`completed`:
        as `download`'s, the caller has read the checkpoint's record and it is COMPLETED)."""
        tmp = tempfile.mkdtemp(prefix=f"det-restore-{storage_id}-")
        try:
            self.download(storage_id, tmp, completed=completed)
            yield pathlib.Path(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


    def read_files(self, storage_id: str, *, completed: bool = False) -> Iterator[_safe_tree.Entry]:
        """The stored directory's entries (determined.storage._safe_tree.Entry: directories, files to `open()`,
        links that stay inside it, links leading out of it), depth first, never following a link out of it;
        `completed` as `download`'s. Read each file before asking for the next entry; close the iterator when
        stopping early. This default downloads into a temporary directory first; backends stream instead."""
        tmp = tempfile.mkdtemp(prefix=f"det-read-{storage_id}-")
        try:
            self.download(storage_id, tmp, completed=completed)
            top = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
            try:
                yield from _safe_tree.read_tree(top)
            finally:
                os.close(top)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def copy_files(self, storage_id: str, dst_dir: str, *, completed: bool = False) -> List[_safe_tree.Entry]:
        """Copy the stored directory into `dst_dir` as `read_files` reads it: files, directories and the links
        that stay inside it; returns what was left out (links leading out of it, fifos, devices)."""
        entries = self.read_files(storage_id, completed=completed)
        try:
            return _safe_tree.copy_entries(entries, dst_dir)
        finally:
            close = getattr(entries, "close", None)
            if close is not None:
                close()


def directory_resources(root: str) -> Dict[str, int]:
    """`{relative path: size in bytes}` of every file under `root` (directories end with '/' and size 0)."""
    base = pathlib.Path(root)
    resources: Dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = pathlib.Path(dirpath).relative_to(base).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        if prefix:
            resources[prefix] = 0
        for name in filenames:
            path = pathlib.Path(dirpath) / name
            try:
                resources[prefix + name] = path.stat().st_size
            except OSError:  # a link to nothing (or a loop of links): the link itself
                resources[prefix + name] = path.lstat().st_size
    return dict(sorted(resources.items()))
