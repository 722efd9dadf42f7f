"""Building a storage manager from an experiment's `checkpoint_storage` config."""
import os
import pathlib
from typing import Any, Mapping, Optional

from determined import errors
from determined.storage._base import StorageManager
from determined.storage._s3 import S3StorageManager
from determined.storage._shared_fs import SharedFSStorageManager

SUPPORTED_TYPES = ("shared_fs", "directory", "s3")
# Types Determined knows that this platform does not store checkpoints in (the master replaces them by its default
# storage when an experiment is created: determined.config.storage.replace_unreachable_storage).
_UNSUPPORTED_TYPES = ("gcs", "hdfs", "azure")


def shared_fs_path(checkpoint_storage: Mapping[str, Any]) -> pathlib.Path:
    """The directory that holds the checkpoints of a shared_fs storage config.

    `storage_path` is relative to `host_path`, or an absolute path inside it; when absent, checkpoints
    go directly under `host_path`.
    """
    host_path = checkpoint_storage.get("host_path")
    if not host_path or not isinstance(host_path, str):
        raise errors.DeterminedError(
            "checkpoint_storage.host_path is required for type shared_fs: set it to an absolute directory, "
            "e.g. host_path: /mnt/checkpoints"
        )
    host = pathlib.Path(host_path).expanduser()
    if not host.is_absolute():
        raise errors.DeterminedError(
            f"checkpoint_storage.host_path {host_path!r} must be an absolute path"
        )
    storage_path: Optional[str] = checkpoint_storage.get("storage_path")
    if not storage_path:
        return host
    sub = pathlib.Path(storage_path).expanduser()
    full = sub if sub.is_absolute() else host / sub
    host_real = os.path.realpath(host)
    full_real = os.path.realpath(full)
    if os.path.commonpath([host_real, full_real]) != host_real:
        raise errors.DeterminedError(
            f"checkpoint_storage.storage_path {storage_path!r} is outside host_path {host_path!r}; "
            "give a path relative to host_path or an absolute path inside it"
        )
    return pathlib.Path(full_real)


def directory_path(checkpoint_storage: Mapping[str, Any]) -> pathlib.Path:
    """The directory of a `directory` storage config (Determined 0.26.3+): its absolute `container_path`."""
    path = checkpoint_storage.get("container_path")
    if not path or not isinstance(path, str) or not os.path.isabs(os.path.expanduser(path)):
        raise errors.DeterminedError(
            f"checkpoint_storage.container_path {path!r} must be an absolute directory for type directory, "
            "e.g. container_path: /mnt/checkpoints"
        )
    return pathlib.Path(os.path.realpath(os.path.expanduser(path)))


def build_storage_manager(checkpoint_storage: Optional[Mapping[str, Any]], *,
                          default_credentials: bool = True) -> StorageManager:
    """The storage manager for a `checkpoint_storage` config (types shared_fs, directory and s3).

    `default_credentials=False`: an s3 storage without keys of its own sends unsigned requests instead of using
    this process's AWS credentials (a server's master acting for a user; see S3StorageManager)."""
    if not checkpoint_storage or not isinstance(checkpoint_storage, Mapping):
        raise errors.DeterminedError(
            "no checkpoint_storage configured: give e.g. {type: shared_fs, host_path: /abs/dir, "
            "storage_path: checkpoints}"
        )
    kind = checkpoint_storage.get("type")
    if kind == "shared_fs":
        return SharedFSStorageManager(str(shared_fs_path(checkpoint_storage)))
    if kind == "directory":
        return SharedFSStorageManager(str(directory_path(checkpoint_storage)))
    if kind == "s3":
        return S3StorageManager(
            bucket=checkpoint_storage.get("bucket"),  # type: ignore[arg-type]
            access_key=checkpoint_storage.get("access_key"),
            secret_key=checkpoint_storage.get("secret_key"),
            endpoint_url=checkpoint_storage.get("endpoint_url"),
            prefix=checkpoint_storage.get("prefix"),
            default_credentials=default_credentials,
        )
    if kind in _UNSUPPORTED_TYPES:
        raise errors.DeterminedError(
            f"checkpoint_storage.type {kind!r} is not supported; use shared_fs, directory or s3 "
            "(s3 also covers S3-compatible servers such as MinIO through endpoint_url)"
        )
    raise errors.DeterminedError(
        f"checkpoint_storage.type {kind!r} is unknown; supported types: {', '.join(SUPPORTED_TYPES)}"
    )
