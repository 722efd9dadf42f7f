"""What a search method may use: a seeded random generator and hyperparameter sampling."""
import random
import uuid
from typing import Any, Dict, Mapping

from determined.config import sample_hparams


class SearchContext:
    """Randomness for one experiment's search, seeded by the experiment seed; its state is part of the snapshot."""

    def __init__(self, seed: int, hparams_config: Mapping[str, Any]) -> None:
        self.rng = random.Random(seed)
        self.hparams_config = dict(hparams_config)

    def sample_hparams(self) -> Dict[str, Any]:
        """One draw of every hyperparameter from its configured distribution."""
        return sample_hparams(self.hparams_config, self.rng)

    def new_request_id(self) -> str:
        """A fresh request id, reproducible from the seed."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def snapshot(self) -> Dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss]}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        version, internal, gauss = snapshot["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
