"""TrialContext: what a Trial's methods see of their experiment, hyperparameters and process."""
import logging
from typing import Any, Dict, Optional

from determined import core, errors
from determined.config.hparams import GLOBAL_BATCH_SIZE_HOW

logger = logging.getLogger("determined")


class TrialContext:
    """The context passed to a Trial's constructor.

    `config` is the canonical experiment config, `hparams` the trial's sampled hyperparameter values, and
    `core_context` the runtime the framework controller drives the trial with.
    """

    def __init__(
        self,
        core_context: core.Context,
        config: Dict[str, Any],
        hparams: Dict[str, Any],
        trial_seed: int,
    ) -> None:
        self._core = core_context
        self.env_config = config
        self.hparams = dict(hparams)
        self._trial_seed = int(trial_seed)
        self.distributed: core.DistributedContext = core_context.distributed
        self._stop_requested = False
        self._per_slot_batch_size: Optional[int] = None
        self._global_batch_size: Optional[int] = None
        if "global_batch_size" in self.hparams:
            self._compute_batch_sizes()

    @property
    def core(self) -> core.Context:
        """The core context (metrics, checkpoints, searcher operations, preemption) of this trial."""
        return self._core

    def get_experiment_config(self) -> Dict[str, Any]:
        """The experiment's configuration (canonical form, every default filled)."""
        return self.env_config

    def get_data_config(self) -> Dict[str, Any]:
        """The experiment config's `data` section (an empty dict when it has none)."""
        return self.env_config.get("data") or {}

    def get_hparams(self) -> Dict[str, Any]:
        """The trial's hyperparameter values, by name."""
        return self.hparams

    def get_hparam(self, name: str) -> Any:
        """The value of one hyperparameter of the trial."""
        if name == "global_batch_size":
            raise errors.DeterminedError(
                "context.get_hparam('global_batch_size') is not allowed: use context.get_per_slot_batch_size() "
                "for the batch size of one slot's data loader, or context.get_global_batch_size() for the "
                "total over all slots"
            )
        if name not in self.hparams:
            group, _, member = name.partition(".")
            nested = ""
            if member and isinstance(self.hparams.get(group), dict):
                nested = (f"; nested hyperparameters arrive nested, as in Determined: "
                          f"context.get_hparam({group!r})[{member.split('.')[0]!r}]")
            raise KeyError(
                f"hyperparameter {name!r} is not in the experiment config; the trial's hyperparameters are: "
                f"{', '.join(sorted(self.hparams)) or 'none'}{nested}"
            )
        return self.hparams[name]

    def get_per_slot_batch_size(self) -> int:
        """The batch size of each slot: `global_batch_size // slots_per_trial`."""
        self._compute_batch_sizes()
        assert self._per_slot_batch_size is not None
        return self._per_slot_batch_size

    def get_global_batch_size(self) -> int:
        """The batch size over all slots: per-slot batch size × slots (global_batch_size rounded down to a
        multiple of the slot count)."""
        self._compute_batch_sizes()
        assert self._global_batch_size is not None
        return self._global_batch_size

    def get_experiment_id(self) -> int:
        return self._core.info.experiment_id

    def get_trial_id(self) -> int:
        return self._core.info.trial_id

    def get_trial_seed(self) -> int:
        return self._trial_seed

    def get_stop_requested(self) -> bool:
        """Whether the trial asked to stop training early (see `set_stop_requested`)."""
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the platform to stop this trial early: it checkpoints and the searcher treats it as done."""
        if not isinstance(stop_requested, bool):
            raise errors.DeterminedError(f"set_stop_requested() takes a bool, got {stop_requested!r}")
        if stop_requested and not self._stop_requested:
            logger.info("the trial requested to stop early")
        self._stop_requested = stop_requested

    def _compute_batch_sizes(self) -> None:
        if self._per_slot_batch_size is not None:
            return
        if "global_batch_size" not in self.hparams:
            raise errors.InvalidTrialError(
                "hyperparameters.global_batch_size: missing; the trial asks for its batch size (per slot or global), "
                f"which is derived from it: {GLOBAL_BATCH_SIZE_HOW}"
            )
        gbs = self.hparams["global_batch_size"]
        slots = self.distributed.size
        if isinstance(gbs, bool) or not isinstance(gbs, int):
            if isinstance(gbs, float) and gbs.is_integer():
                gbs = int(gbs)
            else:
                raise errors.InvalidTrialError(
                    f"hyperparameters.global_batch_size: got {gbs!r}; a positive int: {GLOBAL_BATCH_SIZE_HOW}"
                )
        if gbs < slots:
            raise errors.DeterminedError(
                f"global_batch_size ({gbs}) must be at least the number of slots ({slots}): every slot needs "
                "a batch of at least one record"
            )
        per_slot = gbs // slots
        if per_slot * slots != gbs:
            logger.warning(
                "global_batch_size %d is not divisible by %d slots; using %d (%d per slot)",
                gbs, slots, per_slot * slots, per_slot,
            )
        self._per_slot_batch_size = per_slot
        self._global_batch_size = per_slot * slots
