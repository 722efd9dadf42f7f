"""Model: an entry of the model registry and its versions (checkpoints)."""
from __future__ import annotations

import datetime
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import (Connection, MasterBound, UsageError, json_object, parse_time,
                                                    string_list)
from determined.experimental.client._enums import ModelOrderBy, ModelSortBy, OrderBy, order_by_param, sort_by_param  # noqa: F401 (0.13's names here)

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session


class Model(MasterBound):
    """A model of the registry (0.38): its versions (ModelVersion, numbered from 1) point at checkpoints."""

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
        _session: "Optional[Session | Connection]" = None,
    ) -> None:
        super().__init__(master, _session)
        self.name = name
        self.description = description
        self.creation_time = creation_time
        self.last_updated_time = last_updated_time
        self.metadata = metadata if metadata is not None else {}
        self.num_versions = num_versions
        self.model_id: Optional[int] = None
        self.labels: List[str] = []
        self.archived = False
        self.username = ""
        self.workspace_id: Optional[int] = None

    @classmethod
    def _from_json(cls, data: Dict[str, Any], session: "Session | Connection", master: str = "") -> Any:
        model = cls(data["name"], master=master, _session=session)
        model._update(data)
        return model

    def _update(self, data: Dict[str, Any]) -> None:
        self.name = data.get("name", self.name)
        self.description = data.get("description") or ""
        self.creation_time = parse_time(data.get("creation_time"))
        self.last_updated_time = parse_time(data.get("last_updated_time"))
        self.metadata = data.get("metadata") or {}
        self.num_versions = int(data.get("num_versions") or 0)
        self.model_id = data.get("id")
        self.labels = list(data.get("labels") or [])
        self.archived = bool(data.get("archived"))
        self.username = data.get("owner") or ""
        self.workspace_id = data.get("workspace_id")

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, num_versions={self.num_versions})"

    def reload(self) -> None:
        self._update(self._session.get(f"/models/{self.name}")["model"])

    def _version(self, data: Dict[str, Any], configs: Dict[int, Dict[str, Any]]) -> "ModelVersion":
        return ModelVersion(self, data, self._checkpoint(data, configs))

    def _checkpoint(self, version: Dict[str, Any], configs: Dict[int, Dict[str, Any]]) -> Checkpoint:
        ckpt = version["checkpoint"]
        exp_id = ckpt["experiment_id"]
        if exp_id not in configs:
            configs[exp_id] = self._session.get(f"/experiments/{exp_id}")["experiment"]["config"]
        return Checkpoint._from_json(ckpt, configs[exp_id], self._connection, self._master,
                                     model_version=version["version"], model_name=version.get("model_name", self.name))

    def _version_json(self, version: int) -> Optional[Dict[str, Any]]:
        """The version's JSON; -1 (or 0) the latest (None when there is none)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < -1:
            raise UsageError(f"version must be a version number (1, 2, ...) or -1 for the latest, not {version!r}")
        if version in (-1, 0):
            versions = self._session.get(f"/models/{self.name}/versions", {"order_by": "desc"})["versions"]
            return versions[0] if versions else None
        return self._session.get(f"/models/{self.name}/versions/{version}")["version"]  # type: ignore[no-any-return]

    def get_version(self, version: int = -1) -> "Optional[ModelVersion]":
        """Version `version` of this model (numbers start at 1); -1 (default) the latest, None when there is none."""
        data = self._version_json(version)
        return self._version(data, {}) if data is not None else None

    def list_versions(self, order_by: OrderBy = OrderBy.DESCENDING) -> "List[ModelVersion]":
        """Every version of this model, by version number (descending by default)."""
        answer = self._session.get(f"/models/{self.name}/versions", {"order_by": order_by_param(order_by)})
        self._update(answer["model"])
        configs: Dict[int, Dict[str, Any]] = {}
        return [self._version(v, configs) for v in answer["versions"]]

    def get_versions(self, order_by: OrderBy = OrderBy.DESCENDING) -> "List[ModelVersion]":
        """Deprecated name of list_versions (0.38)."""
        warnings.warn("Model.get_versions() is deprecated; call Model.list_versions() instead.", FutureWarning,
                      stacklevel=2)
        return self.list_versions(order_by)

    def register_version(self, checkpoint_uuid: str) -> "ModelVersion":
        """Make the checkpoint `checkpoint_uuid` the next version of this model."""
        data = self._register(checkpoint_uuid)
        return self._version(data, {})

    def _register(self, checkpoint_uuid: str) -> Dict[str, Any]:
        if not isinstance(checkpoint_uuid, str) or not checkpoint_uuid:
            raise UsageError(f"checkpoint_uuid must be a checkpoint's uuid, not {checkpoint_uuid!r}")
        version = self._session.post(f"/models/{self.name}/versions", {"checkpoint_uuid": checkpoint_uuid})["version"]
        self.num_versions = max(self.num_versions, int(version["version"]))
        return version  # type: ignore[no-any-return]

    def _patch(self, body: Dict[str, Any]) -> None:
        self._update(self._session.patch(f"/models/{self.name}", body)["model"])

    def add_metadata(self, metadata: Dict[str, Any]) -> None:
        """Add user metadata to the model; keys that exist already are replaced."""
        json_object(metadata, "metadata")
        current = self._session.get(f"/models/{self.name}")["model"].get("metadata") or {}
        self._patch({"metadata": {**current, **metadata}})

    def remove_metadata(self, keys: List[str]) -> None:
        """Remove the given top-level keys from the model's metadata (missing keys are ignored)."""
        drop = set(string_list(keys, "keys"))
        current = self._session.get(f"/models/{self.name}")["model"].get("metadata") or {}
        self._patch({"metadata": {k: v for k, v in current.items() if k not in drop}})

    def set_labels(self, labels: List[str]) -> None:
        self._patch({"labels": string_list(labels, "labels")})

    def set_description(self, description: str) -> None:
        self._patch({"description": description})

    def move_to_workspace(self, workspace_name: str) -> None:
        """Move the model to the workspace `workspace_name` (a NotFoundError naming those that exist if none; an
        archived workspace takes no models)."""
        from determined.experimental.client._workspace import workspace_id_of

        self._patch({"workspace_id": workspace_id_of(self._session, workspace_name)})

    def archive(self) -> None:
        self._patch({"archived": True})

    def unarchive(self) -> None:
        self._patch({"archived": False})

    def delete(self) -> None:
        """Delete the model and its versions (their checkpoints stay)."""
        self._session.delete(f"/models/{self.name}")


class ModelVersion:
    """Version `model_version` of model `model_name`: a checkpoint, with a name, a comment, notes and metadata."""

    def __init__(self, model: Model, data: Dict[str, Any], checkpoint: Checkpoint) -> None:
        self._model = model
        self.model_name = model.name
        self.model_id = data.get("model_id", model.model_id)
        self.model_version = int(data["version"])
        self.checkpoint = checkpoint
        self._set(data)

    def _set(self, data: Dict[str, Any]) -> None:
        self.name = data.get("name") or ""
        self.comment = data.get("comment") or ""
        self.notes = data.get("notes") or ""
        self.metadata = data.get("metadata") or {}
        self.creation_time = parse_time((data.get("creation_time") or "").rstrip("Z") or None)

    def __repr__(self) -> str:
        return f"ModelVersion(model_name={self.model_name!r}, model_version={self.model_version})"

    def _path(self) -> str:
        return f"/models/{self.model_name}/versions/{self.model_version}"

    def reload(self) -> None:
        self._set(self._model._session.get(self._path())["version"])

    def _patch(self, body: Dict[str, Any]) -> None:
        self._set(self._model._session.patch(self._path(), body)["version"])

    def set_name(self, name: str) -> None:
        self._patch({"name": name})

    def set_notes(self, notes: str) -> None:
        self._patch({"notes": notes})

    def add_metadata(self, metadata: Dict[str, Any]) -> None:
        self.reload()
        self._patch({"metadata": {**self.metadata, **json_object(metadata, "metadata")}})

    def remove_metadata(self, keys: List[str]) -> None:
        drop = set(string_list(keys, "keys"))
        self.reload()
        self._patch({"metadata": {k: v for k, v in self.metadata.items() if k not in drop}})

    def delete(self) -> None:
        """Remove this version from the model (the checkpoint stays)."""
        self._model._session.delete(self._path())

    def get_metrics(self, group: Optional[str] = None) -> Iterator[Any]:
        """The metrics (`TrialMetrics`) reported by the trials that reported using this model version
        (`report_task_using_model_version`), trial by trial; `group`: only that group (default all). A trial that
        reported using only its checkpoint is among `self.checkpoint.get_metrics()`, not here."""
        from determined.experimental.client import _metrics

        return _metrics.linked_metrics(self._model._session, self._path() + "/metrics", group)

    iter_metrics = get_metrics
