"""`core_context.experimental` (Determined 0.26): the trial records which checkpoint or model version it used, so
that the metrics it reports can be read through them (`Checkpoint.get_metrics()`, `ModelVersion.get_metrics()`)."""
import logging
from typing import Any, Dict, Optional

from determined.common.api import Session
from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")


def _checkpoint_uuid(checkpoint: Any, what: str) -> str:
    uuid = getattr(checkpoint, "uuid", None)
    if not isinstance(uuid, str) or not uuid:
        raise TypeError(f"{what}: expected a Checkpoint of the SDK (determined.experimental.client, e.g. "
                        f"client.get_checkpoint(uuid)), got {type(checkpoint).__name__}")
    return uuid


class ExperimentalCoreContext:
    """Reports that the trial used a checkpoint or a model version. Only the chief (rank 0) reports; the other
    ranks' calls do nothing. Without a master the report is only logged."""

    def __init__(self, session: Optional[Session], trial_id: int, distributed: DistributedContext) -> None:
        self._session = session
        self._trial_id = trial_id
        self._distributed = distributed

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Record that this trial used `checkpoint` (an SDK `Checkpoint`): the metrics it reports are then among
        `checkpoint.get_metrics()`."""
        uuid = _checkpoint_uuid(checkpoint, "report_task_using_checkpoint()")
        self._report({"checkpoint_uuid": uuid}, f"checkpoint {uuid}")

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Record that this trial used `model_version` (an SDK `ModelVersion`, e.g. `model.get_version()`): the
        metrics it reports are then among `model_version.get_metrics()` and its checkpoint's `get_metrics()`."""
        model_id = getattr(model_version, "model_id", None)
        number = getattr(model_version, "model_version", None)
        if not isinstance(model_id, int) or not isinstance(number, int) or not hasattr(model_version, "checkpoint"):
            raise TypeError("report_task_using_model_version(): expected a ModelVersion of the SDK "
                            "(determined.experimental.client, e.g. client.get_model(name).get_version()), got "
                            f"{type(model_version).__name__}")
        uuid = _checkpoint_uuid(model_version.checkpoint, "report_task_using_model_version(): its checkpoint")
        name = getattr(model_version, "model_name", model_id)
        self._report({"model_id": model_id, "model_version": number, "checkpoint_uuid": uuid},
                     f"version {number} of model {name!r} (checkpoint {uuid})")

    def _report(self, body: Dict[str, Any], what: str) -> None:
        if self._distributed.rank != 0:
            return
        if self._session is None:
            logger.info("this run uses %s (not recorded: no master)", what)
            return
        self._session.post(f"/trials/{self._trial_id}/source_info", json={**body, "kind": "INFERENCE"})
