"""What a trial process knows about itself."""
import dataclasses
from typing import Any, Dict, Optional


@dataclasses.dataclass
class ClusterInfo:
    """The identity and inputs of the running trial.

    `latest_checkpoint` is the uuid of the checkpoint to resume from (None on a fresh start) and
    `steps_completed` the number of batches that checkpoint had trained.
    """

    trial_id: int
    experiment_id: int
    allocation_id: str
    config: Dict[str, Any]
    hparams: Dict[str, Any]
    trial_seed: int
    latest_checkpoint: Optional[str] = None
    steps_completed: int = 0
    master_url: Optional[str] = None

    @property
    def searcher_metric(self) -> Optional[str]:
        return (self.config.get("searcher") or {}).get("metric")

    @property
    def smaller_is_better(self) -> bool:
        return bool((self.config.get("searcher") or {}).get("smaller_is_better", True))
