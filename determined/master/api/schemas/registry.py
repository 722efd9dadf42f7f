"""The model registry: /models, their versions, their metrics (views/serialize.model and model_version)."""
from typing import Any, Dict, List, Optional

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire
from determined.master.api.schemas.checkpoints import Checkpoint, Omitted


class RegisteredModel(Wire):
    """A model of the registry (views/serialize.model)."""

    name: str
    description: str
    metadata: Dict[str, Any] = Field(description="the user's metadata")
    creation_time: str
    last_updated_time: str
    num_versions: int
    owner: str = Field(description="the user who may change it besides admins ('' for nobody)")
    workspace_id: int
    workspace: str = Field(description="the name of its workspace")
    id: int
    labels: List[str]
    archived: bool


class ModelVersion(Wire):
    """A version of a registered model: one checkpoint (views/serialize.model_version)."""

    version: int
    model_name: str
    model_id: int
    name: str
    comment: str
    notes: str
    metadata: Dict[str, Any] = Field(description="the user's metadata")
    creation_time: str
    checkpoint: Checkpoint


class ModelAnswer(Wire):
    """One model: `{"model": {...}}`."""

    model: RegisteredModel


class ModelList(Wire):
    """Models; `omitted` names rows that cannot be shown."""

    models: List[RegisteredModel]
    omitted: Optional[List[Omitted]] = None


class ModelVersionAnswer(Wire):
    """One model version: `{"version": {...}}`."""

    version: ModelVersion


class ModelVersionList(Wire):
    """The versions of a model and the model; `omitted` names versions that cannot be shown."""

    versions: List[ModelVersion]
    model: RegisteredModel
    omitted: Optional[List[Omitted]] = None


class CreateModelBody(StrictWire):
    """POST /models/{name}: a new model."""

    description: Any = Field(None, description="a text (default '')")
    metadata: Any = Field(None, description="a JSON object (default {})")
    workspace_id: Any = Field(None, description="the id of its workspace (default: Uncategorized, 1)")


class UpdateModelBody(StrictWire):
    """PATCH /models/{name}: the fields to change; absent ones stay."""

    description: Any = Field(None, description="a text")
    metadata: Any = Field(None, description="a JSON object replacing the whole metadata")
    owner: Any = Field(None, description="the username of the new owner (admins only)")
    workspace_id: Any = Field(None, description="the id of the workspace to move it to")
    labels: Any = Field(None, description="a list of labels replacing the old ones")
    archived: Any = Field(None, description="true or false")


class RegisterVersionBody(StrictWire):
    """POST /models/{name}/versions: the COMPLETED checkpoint that becomes the next version."""

    checkpoint_uuid: Any = Field(None, description="the uuid of a COMPLETED checkpoint (required)")


class UpdateVersionBody(StrictWire):
    """PATCH /models/{name}/versions/{version}: the fields to change; absent ones stay."""

    name: Any = Field(None, description="a name")
    comment: Any = Field(None, description="a text")
    notes: Any = Field(None, description="a text")
    metadata: Any = Field(None, description="a JSON object replacing the whole metadata")
