"""Model: an entry of the model registry and its versions (checkpoints)."""
from __future__ import annotations

import datetime
import enum
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import MasterBound, UsageError, json_object, parse_time, string_list

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


class ModelSortBy(enum.Enum):
    """The field to sort a list of models on."""

    UNSPECIFIED = 0
    NAME = 1
    DESCRIPTION = 2
    CREATION_TIME = 4
    LAST_UPDATED_TIME = 5


class ModelOrderBy(enum.Enum):
    """Ascending or descending order."""

    ASCENDING = 1
    ASC = 1
    DESCENDING = 2
    DESC = 2


def sort_by_param(sort_by: Any) -> Optional[str]:
    """The `sort_by` query value of a ModelSortBy (or its name); None for UNSPECIFIED."""
    member = _member(ModelSortBy, sort_by, "sort_by")
    return None if member is ModelSortBy.UNSPECIFIED else member.name.lower()


def order_by_param(order_by: Any) -> str:
    member = _member(ModelOrderBy, order_by, "order_by")
    return "asc" if member is ModelOrderBy.ASCENDING else "desc"


def _member(enum_cls: Any, value: Any, what: str) -> Any:
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str) and value.upper() in enum_cls.__members__:
        return enum_cls[value.upper()]
    names = ", ".join(f"{enum_cls.__name__}.{n}" for n in enum_cls.__members__)
    raise UsageError(f"{what} must be one of {names}, not {value!r}")


class Model(MasterBound):
    """A model of the registry; its versions are checkpoints."""

    def __init__(
        self,
        name: str,
        description: str = "",
        creation_time: Optional[datetime.datetime] = None,
        last_updated_time: Optional[datetime.datetime] = None,
        metadata: Optional[Dict[str, Any]] = None,
        master: str = "",
        *,
        num_versions: int = 0,
        _session: Optional[Session] = None,
    ) -> None:
        super().__init__(master, _session)
        self.name = name
        self.description = description
        self.creation_time = creation_time
        self.last_updated_time = last_updated_time
        self.metadata = metadata if metadata is not None else {}
        self.num_versions = num_versions

    @classmethod
    def _from_json(cls, data: Dict[str, Any], session: Session, master: str = "") -> "Model":
        return cls(
            data["name"],
            data.get("description") or "",
            parse_time(data.get("creation_time")),
            parse_time(data.get("last_updated_time")),
            data.get("metadata") or {},
            master,
            num_versions=int(data.get("num_versions") or 0),
            _session=session,
        )

    def _update(self, data: Dict[str, Any]) -> None:
        self.description = data.get("description") or ""
        self.creation_time = parse_time(data.get("creation_time"))
        self.last_updated_time = parse_time(data.get("last_updated_time"))
        self.metadata = data.get("metadata") or {}
        self.num_versions = int(data.get("num_versions") or 0)

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, num_versions={self.num_versions})"

    def _checkpoint(self, version: Dict[str, Any], configs: Dict[int, Dict[str, Any]]) -> Checkpoint:
        ckpt = version["checkpoint"]
        exp_id = ckpt["experiment_id"]
        if exp_id not in configs:
            configs[exp_id] = self._session.get(f"/experiments/{exp_id}")["experiment"]["config"]
        return Checkpoint._from_json(ckpt, configs[exp_id], self._session, self._master,
                                     model_version=version["version"], model_name=version.get("model_name", self.name))

    def get_version(self, version: int = 0) -> Optional[Checkpoint]:
        """The checkpoint of version `version` of this model; 0 (default) = the latest, None when there is none."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise UsageError(f"version must be a version number (1, 2, ...) or 0 for the latest, not {version!r}")
        if version == 0:
            versions = self._session.get(f"/models/{self.name}/versions", {"order_by": "desc"})["versions"]
            return self._checkpoint(versions[0], {}) if versions else None
        answer = self._session.get(f"/models/{self.name}/versions/{version}")
        return self._checkpoint(answer["version"], {})

    def get_versions(self, order_by: ModelOrderBy = ModelOrderBy.DESCENDING) -> List[Checkpoint]:
        """The checkpoints of every version of this model, by version number (descending by default)."""
        answer = self._session.get(f"/models/{self.name}/versions", {"order_by": order_by_param(order_by)})
        self._update(answer["model"])
        configs: Dict[int, Dict[str, Any]] = {}
        return [self._checkpoint(v, configs) for v in answer["versions"]]

    def register_version(self, checkpoint_uuid: str) -> Checkpoint:
        """Make the checkpoint `checkpoint_uuid` the next version of this model; returns that checkpoint."""
        if not isinstance(checkpoint_uuid, str) or not checkpoint_uuid:
            raise UsageError(f"checkpoint_uuid must be a checkpoint's uuid, not {checkpoint_uuid!r}")
        version = self._session.post(f"/models/{self.name}/versions", {"checkpoint_uuid": checkpoint_uuid})["version"]
        self.num_versions = max(self.num_versions, int(version["version"]))
        return self._checkpoint(version, {})

    def add_metadata(self, metadata: Dict[str, Any]) -> None:
        """Add user metadata to the model; keys that exist already are replaced."""
        json_object(metadata, "metadata")
        current = self._session.get(f"/models/{self.name}")["model"].get("metadata") or {}
        answer = self._session.patch(f"/models/{self.name}", {"metadata": {**current, **metadata}})
        self._update(answer["model"])

    def remove_metadata(self, keys: List[str]) -> None:
        """Remove the given top-level keys from the model's metadata (missing keys are ignored)."""
        drop = set(string_list(keys, "keys"))
        current = self._session.get(f"/models/{self.name}")["model"].get("metadata") or {}
        answer = self._session.patch(f"/models/{self.name}",
                                     {"metadata": {k: v for k, v in current.items() if k not in drop}})
        self._update(answer["model"])
