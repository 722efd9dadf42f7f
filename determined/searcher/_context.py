"""What a search method may use: a seeded random generator and hyperparameter sampling."""
import random
import uuid
from typing import Any, Dict, Mapping, Optional

from determined.config import sample_hparams


# The fewest trials a search keeps created and unfinished when the platform runs it (more once they end).
MIN_WINDOW = 16

# The most trials one experiment may create: every trial is a row with its metrics and logs, and a search
# method's state, stored with every event of the search, holds the trials it made; past this an event costs
# more than a fraction of a second and a list of trials no longer fits on a page. Replacements of INVALID_HP
# trials stop there too.
MAX_TRIALS = 10_000


class SearchContext:
    """Randomness for one experiment's search, seeded by the experiment seed; its state is part of the snapshot.

    `capacity` (not part of the snapshot) is how many trials of the experiment the platform can run at once
    (its slots / slots_per_trial), or None when the search runs on its own (simulations, previews): then a
    method creates its trials as eagerly as its algorithm allows.
    """

    def __init__(self, seed: int, hparams_config: Mapping[str, Any], capacity: Optional[int] = None) -> None:
        self.rng = random.Random(seed)
        self.hparams_config = dict(hparams_config)
        self.capacity = capacity

    def window(self, max_concurrent_trials: int = 0) -> Optional[int]:
        """How many trials a method may have created and not yet finished on the platform: `max_concurrent_trials`
        when set, else max(MIN_WINDOW, capacity); None (no limit) for a search that runs on its own.

        A method creates more as trials end, so a request never creates more trials than the platform runs
        (a search of a million trials costs no more to start than one of sixteen) and the same seed still gives
        the same trials in the same order: every draw of randomness happens at a creation, in creation order.
        """
        if self.capacity is None:
            return None
        if max_concurrent_trials and max_concurrent_trials > 0:
            return int(max_concurrent_trials)
        return max(MIN_WINDOW, int(self.capacity))

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
