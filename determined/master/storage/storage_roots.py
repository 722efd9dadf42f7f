"""Where a server's experiments may keep checkpoints, and the checks before anything is deleted there.

A server (`det master up`) accepts a `shared_fs` checkpoint storage only when its directory (host_path joined
with storage_path, every symbolic link resolved) is one of the master's allowed storage roots or inside one; a
`directory` storage (its `container_path`) likewise.
The roots come from the master config (`checkpoint_storage_roots`, `--allowed-storage-root`); the default is
the master's own `<data dir>/checkpoints`. The data dir itself (database, lock file, work dirs) is never a
root: a root may not be the data dir, contain it, or lie inside it other than under its `checkpoints/`.
The embedded master (one user, on their own machine) has no roots and accepts any directory.

Inside a root no path component may be a symbolic link (a link above a root, such as /mnt/ckpt -> /data/ckpt, is
fine): a link planted in a root (by a trial, whose account may create entries there) could make one experiment's
storage directory another's while still resolving inside the root.

Checkpoint ids are UUIDs in canonical form (`str(uuid.uuid4())`); GC and every deletion touch only
`<storage dir>/<uuid>`, and only after the storage dir passes these checks again (a link may have been
planted after submission).
"""
import os
import pathlib
import uuid
from typing import Any, List, Mapping, Optional, Sequence

from determined import errors
from determined.storage import directory_path, shared_fs_path

CHECKPOINTS_DIR = "checkpoints"


def is_checkpoint_uuid(value: Any) -> bool:
    """Whether `value` is a UUID written the way the platform writes them (lowercase, with hyphens)."""
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def resolve_roots(roots: Sequence[Any], data_dir: "str | os.PathLike[str]") -> List[pathlib.Path]:
    """The allowed storage roots of a master, resolved; raises DeterminedError naming a root that is not allowed."""
    data = os.path.realpath(data_dir)
    own = os.path.join(data, CHECKPOINTS_DIR)
    resolved: List[pathlib.Path] = []
    for root in roots:
        if not isinstance(root, str) or not os.path.isabs(os.path.expanduser(root)):
            raise errors.DeterminedError(
                f"checkpoint_storage_roots: {root!r} is not an absolute directory; give absolute paths such as "
                f"/mnt/checkpoints")
        real = os.path.realpath(os.path.expanduser(root))
        if _inside(data, real):
            raise errors.DeterminedError(
                f"checkpoint_storage_roots: {root} contains the master's data dir {data} (its database and lock "
                f"file); choose a directory outside it, or {own}")
        if _inside(real, data) and not _inside(real, own):
            raise errors.DeterminedError(
                f"checkpoint_storage_roots: {root} is inside the master's data dir {data}; only its {own} may hold "
                "checkpoints")
        resolved.append(pathlib.Path(real))
    return resolved


def default_roots(data_dir: "str | os.PathLike[str]") -> List[str]:
    return [os.path.join(os.path.realpath(data_dir), CHECKPOINTS_DIR)]


def storage_problems(checkpoint_storage: Optional[Mapping[str, Any]], roots: Sequence[pathlib.Path],
                     data_dir: "str | os.PathLike[str]") -> List[str]:
    """Why a canonical checkpoint storage may not be used on a master with these roots (empty: it may)."""
    kind = checkpoint_storage.get("type") if checkpoint_storage else None
    if kind not in ("shared_fs", "directory"):
        return []
    assert checkpoint_storage is not None
    allowed = ", ".join(str(r) for r in roots)
    try:
        directory = os.path.realpath(storage_directory(checkpoint_storage))
    except errors.DeterminedError as e:
        return [f"{e}; this master stores checkpoints only inside: {allowed}"]
    data = os.path.realpath(data_dir)
    if kind == "directory":
        field, where = "container_path", repr(checkpoint_storage.get("container_path"))
    else:
        field, where = "host_path", f"{checkpoint_storage.get('host_path')!r}" + (
            f" with storage_path {checkpoint_storage.get('storage_path')!r}"
            if checkpoint_storage.get("storage_path") else "")
    if _inside(data, directory):
        what = "the master's data dir" if directory == data else "a directory that holds the master's data dir"
        return [f"checkpoint_storage.{field}: {where} is {directory}, {what} (its database and lock file); this "
                f"master stores checkpoints only inside: {allowed}"]
    if _inside(directory, data) and not _inside(directory, os.path.join(data, CHECKPOINTS_DIR)):
        return [f"checkpoint_storage.{field}: {where} is {directory}, inside the master's data dir (its database, "
                f"lock file and work dirs); this master stores checkpoints only inside: {allowed}"]
    if not any(_inside(directory, str(root)) for root in roots):
        return [f"checkpoint_storage.{field}: {where} is {directory}, outside the directories this master stores "
                f"checkpoints in: {allowed}; use one of them (or a directory inside one), or S3 storage, or ask the "
                "master's admin to add a root (checkpoint_storage_roots in the master config)"]
    link = _link_inside_root(_given_path(checkpoint_storage), roots)
    if link is not None:
        return [f"checkpoint_storage.{field}: {where} passes through {link}, a symbolic link inside a storage root "
                f"(-> {os.readlink(link)}); this master refuses links inside its roots (a link there could make one "
                f"experiment's storage another's): give the real directory, {directory}"]
    return []


def _given_path(checkpoint_storage: Mapping[str, Any]) -> str:
    """The storage directory as the config writes it, links not resolved (storage_directory resolves them)."""
    if checkpoint_storage.get("type") == "directory":
        return os.path.expanduser(str(checkpoint_storage.get("container_path")))
    host = os.path.expanduser(str(checkpoint_storage.get("host_path")))
    sub = checkpoint_storage.get("storage_path")
    return os.path.join(host, os.path.expanduser(sub)) if isinstance(sub, str) and sub else host


def _link_inside_root(path: str, roots: Sequence[pathlib.Path]) -> Optional[str]:
    """The first component of `path` that is a symbolic link in a directory that resolves inside a root (None)."""
    path = os.path.abspath(path)
    parts = pathlib.PurePath(path).parts
    current = parts[0]
    for part in parts[1:]:
        parent, current = current, os.path.join(current, part)
        if any(_inside(os.path.realpath(parent), str(root)) for root in roots) and os.path.islink(current):
            return current
    return None


def storage_directory(checkpoint_storage: Mapping[str, Any]) -> pathlib.Path:
    """The directory of a `shared_fs` or `directory` storage (raises DeterminedError naming a bad field)."""
    if checkpoint_storage.get("type") == "directory":
        return directory_path(checkpoint_storage)
    return shared_fs_path(checkpoint_storage)
