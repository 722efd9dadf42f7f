"""Checkpoint storage backends: upload, download and delete checkpoint directories, atomically."""
from determined.storage._base import StorageManager, directory_resources
from determined.storage._build import SUPPORTED_TYPES, build_storage_manager, directory_path, shared_fs_path
from determined.storage._s3 import S3StorageError, S3StorageManager
from determined.storage._shared_fs import SharedFSStorageManager

__all__ = [
    "StorageManager",
    "SharedFSStorageManager",
    "S3StorageManager",
    "S3StorageError",
    "build_storage_manager",
    "shared_fs_path",
    "directory_path",
    "directory_resources",
    "SUPPORTED_TYPES",
]
