"""`determined.horovod.hvd`: the Horovod handle of Determined 0.12-0.20 trial code, over this platform's collectives.

In Determined up to 0.20 a PyTorchTrial on several slots ran under Horovod, and trial code used
`from determined.horovod import hvd` for its own collectives (`hvd.allreduce(num_boxes)`, `hvd.rank()`, ...).
Horovod is not available here (Determined deprecated it in 0.38): a PyTorchTrial's workers form a torch.distributed
process group instead. `hvd` answers Horovod's collective calls over that group, with Horovod's meanings
(`allreduce` averages by default and returns a new tensor, `allgather` concatenates along the first dimension, even
when the ranks' first dimensions differ). On one slot every collective returns its input, as Horovod's do on one
process. Horovod's training wrappers (`DistributedOptimizer`, `join`, process sets) have no counterpart: the
platform synchronizes gradients itself (DDP), so they raise an error that says so. The TensorFlow flavours
(`require_horovod_type("tensorflow")`) are refused with the reason: Keras and Estimator trials distribute with
`tf.distribute` here.
"""
import importlib
from typing import Any, Optional

from determined import errors

_KNOWN_TYPES = ("tensorflow", "tensorflow.keras", "torch")


class _PolyHorovod:
    """The `hvd` of Determined's trial code: one Horovod flavour per process, chosen once (torch by default)."""

    def __init__(self) -> None:
        self._poly_hvd_type: Optional[str] = None
        self._poly_hvd_first_reason = "(horovod type has not been set)"
        self._poly_hvd_module: Any = None

    def require_horovod_type(self, horovod_type: str, reason: str) -> None:
        """Choose the Horovod flavour of this process ("torch" here); a second, different choice is an error."""
        if horovod_type not in _KNOWN_TYPES:
            raise ValueError(f"unknown horovod type {horovod_type!r}; the known types are {', '.join(_KNOWN_TYPES)}")
        if self._poly_hvd_type is not None:
            if horovod_type != self._poly_hvd_type:
                raise errors.DeterminedError(
                    f"require_horovod_type() called with type {horovod_type} after a previous call with type "
                    f"{self._poly_hvd_type} in the same process. The reason for the first call was "
                    f"'{self._poly_hvd_first_reason}'; the reason for this call is '{reason}'.")
            return
        if horovod_type != "torch":
            raise errors.DeterminedError(
                f"determined.horovod.hvd ({horovod_type}): Horovod is not available on this platform, and its "
                "TensorFlow collectives have no counterpart here: TFKerasTrials and EstimatorTrials distribute with "
                "tf.distribute (MultiWorkerMirroredStrategy), which reduces gradients and metrics itself. "
                "hvd works for PyTorch code, over the trial's torch.distributed process group.")
        self._poly_hvd_module = importlib.import_module("determined.pytorch._horovod")
        self._poly_hvd_type = horovod_type
        self._poly_hvd_first_reason = reason

    def _module(self) -> Any:
        if self._poly_hvd_module is None:
            # Determined's PyTorchTrial harness chose "torch" before the trial's code ran; so does this face.
            self.require_horovod_type("torch", "first use of determined.horovod.hvd")
        return self._poly_hvd_module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_poly_hvd_"):
            raise AttributeError(attr)
        return getattr(self._module(), attr)

    def __dir__(self) -> Any:
        return sorted(set(super().__dir__()) | set(getattr(self._module(), "__all__", ())))


hvd = _PolyHorovod()

__all__ = ["hvd"]
