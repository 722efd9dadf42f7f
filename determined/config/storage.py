"""``checkpoint_storage``, ``tensorboard_storage`` and ``data_layer``: one section per storage type."""
import posixpath
from typing import Any, Dict, Mapping, Optional

from determined.config.errors import Problems, join_path
from determined.config.fields import INVALID, REQUIRED, Enum, Field, Int, Section, Spec, Str, Union

GC_DEFAULTS = {"save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
_GC = {name: Field(Int(minimum=0), default) for name, default in GC_DEFAULTS.items()}
PROPAGATION = Enum("rprivate", "private", "rslave", "slave", "rshared", "shared")
_ABS_PATH = Str(pattern=r"/.*", allowed="an absolute path (starting with /)")
_TEXT = Field(Str(), None)


def _shared_fs() -> Dict[str, Field]:
    return {
        "host_path": Field(_ABS_PATH, REQUIRED, hint="the absolute path of the shared directory on the host"),
        "storage_path": _TEXT,
        "propagation": Field(PROPAGATION, "rprivate"),
    }


def _types(with_gc: bool) -> Dict[str, Section]:
    gc = dict(_GC) if with_gc else {}
    # Determined's struct also carries these three paths; they are accepted and ignored (nothing mounts containers).
    legacy_paths = ("container_path", "checkpoint_path", "tensorboard_path")
    bucket = Field(Str(nonempty=True, allowed="a bucket name"), REQUIRED)
    return {
        "shared_fs": Section({**_shared_fs(), **gc}, extra_keys=legacy_paths),
        # 0.26.3: a directory the trial writes to directly (in Determined, a path inside its container).
        "directory": Section(
            {"container_path": Field(_ABS_PATH, REQUIRED, hint="the absolute path of the checkpoint directory"), **gc}
        ),
        "s3": Section(
            {
                "bucket": bucket,
                "access_key": _TEXT,
                "secret_key": _TEXT,
                "endpoint_url": _TEXT,
                "prefix": _TEXT,
                **gc,
            }
        ),
        "gcs": Section({"bucket": bucket, "prefix": _TEXT, **gc}),
        "azure": Section(
            {"container": _TEXT, "connection_string": _TEXT, "account_url": _TEXT, "credential": _TEXT, **gc}
        ),
        "hdfs": Section(
            {
                "hdfs_url": Field(Str(nonempty=True, allowed="the namenode URL(s), ';'-separated"), REQUIRED),
                "hdfs_path": Field(Str(nonempty=True, allowed="a path in HDFS"), REQUIRED),
                "user": _TEXT,
                **gc,
            }
        ),
    }


# Types Determined stores checkpoints in that this platform cannot reach: an experiment that names one runs with the
# master's default storage instead (see ``replace_unreachable_storage``), and says so.
UNREACHABLE_TYPES = ("gcs", "azure", "hdfs")


class StorageSpec(Spec):
    """A storage config, checked for its type; shared_fs also checks that storage_path stays inside host_path."""

    def __init__(self, with_gc: bool) -> None:
        self.union = Union(_types(with_gc))
        self.allowed = self.union.allowed
        self.gc_only = Section(dict(_GC)) if with_gc else None

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if self.gc_only is not None and isinstance(value, Mapping) and value and "type" not in value \
                and all(key in GC_DEFAULTS for key in value):
            # Only GC settings: Determined merged them into the cluster's default storage (the master does here).
            return self.gc_only.check(value, path, problems)
        out = self.union.check(value, path, problems)
        if out is INVALID:
            return INVALID
        if out["type"] == "shared_fs":
            for name in ("container_path", "checkpoint_path", "tensorboard_path"):
                out.pop(name, None)
            storage_path, host_path = out.get("storage_path"), out.get("host_path")
            if isinstance(storage_path, str) and isinstance(host_path, str) and posixpath.isabs(storage_path):
                host = posixpath.normpath(host_path)
                inner = posixpath.normpath(storage_path)
                if inner != host and not inner.startswith(host.rstrip("/") + "/"):
                    problems.add(
                        join_path(path, "storage_path"),
                        f"the absolute path {storage_path!r} is not inside host_path {host_path!r}",
                        "give a path relative to host_path, or an absolute path inside it",
                    )
                    return INVALID
        return out


CHECKPOINT_STORAGE = StorageSpec(with_gc=True)
TENSORBOARD_STORAGE = StorageSpec(with_gc=False)

DATA_LAYER = Union(
    {
        "shared_fs": Section({"host_storage_path": _TEXT, "container_storage_path": _TEXT}),
        "s3": Section(
            {
                "bucket": Field(Str(nonempty=True, allowed="a bucket name"), REQUIRED),
                "bucket_directory_path": Field(Str(), REQUIRED, hint="the directory in the bucket for cached datasets (a string)"),
                "local_cache_host_path": _TEXT,
                "local_cache_container_path": _TEXT,
                "access_key": _TEXT,
                "secret_key": _TEXT,
                "endpoint_url": _TEXT,
            }
        ),
        "gcs": Section(
            {
                "bucket": Field(Str(nonempty=True, allowed="a bucket name"), REQUIRED),
                "bucket_directory_path": Field(Str(), REQUIRED, hint="the directory in the bucket for cached datasets (a string)"),
                "local_cache_host_path": _TEXT,
                "local_cache_container_path": _TEXT,
            }
        ),
    }
)
DATA_LAYER_DEFAULT = {"type": "shared_fs", "host_storage_path": None, "container_storage_path": None}


def default_checkpoint_storage(host_path: str, storage_path: str = "checkpoints") -> Dict[str, Any]:
    """The canonical shared_fs checkpoint storage the master uses when an experiment gives none."""
    return {"type": "shared_fs", "host_path": str(host_path), "storage_path": storage_path, "propagation": "rprivate",
            **GC_DEFAULTS}


def with_gc_policy(storage: Mapping[str, Any], **policy: int) -> Dict[str, Any]:
    """A copy of a canonical checkpoint storage with some of save_experiment_best/save_trial_best/save_trial_latest."""
    unknown = set(policy) - set(GC_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown GC setting(s) {sorted(unknown)}; allowed: {', '.join(GC_DEFAULTS)}")
    return {**storage, **policy}


def complete_storage(storage: Optional[Mapping[str, Any]], default: Mapping[str, Any]) -> Dict[str, Any]:
    """The checkpoint storage an experiment uses, given the master's ``default``: the default when the config
    gives none; the default with the config's GC settings when it gives only those (as Determined merged them into
    the cluster's storage) or a type this platform cannot reach (gcs, azure, hdfs); else the config's own."""
    if storage is None:
        return dict(default)
    if storage.get("type") is None or storage.get("type") in UNREACHABLE_TYPES:
        return {**default, **{name: storage[name] for name in GC_DEFAULTS if name in storage}}
    return dict(storage)
