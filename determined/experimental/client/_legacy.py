"""The 0.13 faces of seed 002 over the 0.38 classes: `determined.experimental.Determined` and `.Model`, whose
model versions are Checkpoints numbered from 1 with `get_version(0)` the latest (0.38: ModelVersion, -1)."""
from typing import List, Optional

from determined.experimental.client import _determined, _model
from determined.experimental.client._checkpoint import Checkpoint
from determined.experimental.client._common import UsageError
from determined.experimental.client._enums import OrderBy


class Model(_model.Model):
    """Class representing a model. Contains methods for managing metadata and model versions."""

    def get_version(self, version: int = 0) -> Optional[Checkpoint]:  # type: ignore[override]
        """The checkpoint of version `version` of this model; 0 (default) = the latest, None when there is none."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise UsageError(f"version must be a version number (1, 2, ...) or 0 for the latest, not {version!r}")
        found = super().get_version(version or -1)
        return found.checkpoint if found is not None else None

    def get_versions(self, order_by: OrderBy = OrderBy.DESCENDING) -> List[Checkpoint]:  # type: ignore[override]
        """The checkpoints of every version of this model, by version number (descending by default)."""
        return [v.checkpoint for v in self.list_versions(order_by)]

    def register_version(self, checkpoint_uuid: str) -> Checkpoint:  # type: ignore[override]
        """Make the checkpoint `checkpoint_uuid` the next version of this model; returns that checkpoint."""
        return super().register_version(checkpoint_uuid).checkpoint


class Determined(_determined.Determined):
    """Determined gives access to Determined API objects (the 0.13 face: models as in seed 002)."""

    _model_class = Model
