"""Code written for the PyTorch of Determined 0.12-0.26 (torch 1.x to 2.6), run on the torch 2.x installed here.

Two idioms of that era no longer work and are carried over here, installed when `determined.pytorch` is imported:

* `verbose=` of the learning-rate schedulers in `torch.optim.lr_scheduler` (`StepLR(..., verbose=True)`,
  `ReduceLROnPlateau(opt, "min", verbose=True)`, and a scheduler subclass's `super().__init__(optimizer,
  last_epoch, verbose)`). torch 1.4-2.6 took it on every scheduler; later releases removed it, so such code raises
  `TypeError: ... got an unexpected keyword argument 'verbose'`. Here the argument is accepted, and with a true
  value each step that changes a learning rate prints what those releases printed
  (`Adjusting learning rate of group 0 to 1.0000e-02.`).

  Where the installed torch still has `verbose`, nothing is changed.
* The comparison methods' results laid out in order (`Tensor.eq`, `ne`, `lt`, `le`, `gt`, `ge`). torch 1.4 (the
  torch of Determined 0.12/0.13's images) returned them contiguous whatever its inputs' strides; torch 1.5+ gives
  them the strides of a non-contiguous input. The top-k accuracy that code of that era copied from PyTorch's
  ImageNet example, `correct = pred.t().eq(...)` then `correct[:k].view(-1)`, so stops with "view size is not
  compatible with input tensor's size and stride". Such a result is a new tensor either way, so returning it
  contiguous changes no value and no sharing of storage, only its strides (a copy happens only when an input was
  not contiguous).
"""
import functools
import inspect
import threading
import weakref
from typing import Any, Callable, List, Set

_lock = threading.Lock()
_installed = False


def _takes_verbose(init: Callable[..., Any]) -> bool:
    try:
        return "verbose" in inspect.signature(init).parameters
    except (TypeError, ValueError):
        return True  # not introspectable: leave it alone


def _lrs(scheduler: Any) -> List[float]:
    optimizer = getattr(scheduler, "optimizer", None)
    return [float(g["lr"]) for g in getattr(optimizer, "param_groups", [])]


# Schedulers built with a true `verbose`. Kept here, not on the scheduler: a scheduler's state_dict() is its
# __dict__, which a checkpoint saves.
_verbose: "weakref.WeakSet[Any]" = weakref.WeakSet()
_stepping: Set[int] = set()


def _announce_lr_changes(cls: type) -> None:
    """Wrap `cls.step` to print each learning rate a verbose scheduler changes, as torch's `verbose=True` did."""
    step = cls.__dict__["step"]

    @functools.wraps(step)
    def verbose_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self not in _verbose or id(self) in _stepping:  # a subclass's step calling its base's: print once
            return step(self, *args, **kwargs)
        before = _lrs(self)
        _stepping.add(id(self))
        try:
            result = step(self, *args, **kwargs)
        finally:
            _stepping.discard(id(self))
        for group, (old, new) in enumerate(zip(before, _lrs(self))):
            if new != old:
                print(f"Adjusting learning rate of group {group} to {new:.4e}.")
        return result

    cls.step = verbose_step  # type: ignore[attr-defined]


def _accept_verbose(cls: type, positional_index: int) -> None:
    """Make `cls.__init__` take `verbose` (by keyword, or at `positional_index` among the positional arguments)."""
    init = cls.__dict__["__init__"]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        verbose = kwargs.pop("verbose", False)
        if positional_index >= 0 and len(args) > positional_index:
            verbose = args[positional_index]
            args = args[:positional_index] + args[positional_index + 1:]
        init(self, *args, **kwargs)
        if verbose and verbose != "deprecated":
            _verbose.add(self)

    cls.__init__ = __init__  # type: ignore[misc]


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _contiguous_result(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method`, with its result made contiguous when torch laid it out after a non-contiguous input."""

    @functools.wraps(method)
    def compare(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        return result if result.is_contiguous() else result.contiguous()

    compare._det_contiguous_result = True  # type: ignore[attr-defined]
    return compare


def _contiguous_comparisons() -> None:
    import torch

    for name in _COMPARISONS:
        method = getattr(torch.Tensor, name, None)
        if method is not None and not getattr(method, "_det_contiguous_result", False):
            setattr(torch.Tensor, name, _contiguous_result(method))


def install() -> None:
    """Install the shims into the imported torch. Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        _contiguous_comparisons()
        from torch.optim import lr_scheduler

        base = getattr(lr_scheduler, "LRScheduler", None) or getattr(lr_scheduler, "_LRScheduler", None)
        if base is None or _takes_verbose(base.__init__):
            return
        for cls in list(vars(lr_scheduler).values()):
            if not (isinstance(cls, type) and (issubclass(cls, base) or cls.__name__ == "ReduceLROnPlateau")):
                continue
            if "step" in cls.__dict__:
                _announce_lr_changes(cls)
            if "__init__" not in cls.__dict__:
                continue
            if cls is base:
                # The base class's old signature: (optimizer, last_epoch=-1, verbose=False).
                _accept_verbose(cls, positional_index=2)
            elif issubclass(cls, base) or cls.__name__ == "ReduceLROnPlateau":
                if not _takes_verbose(cls.__dict__["__init__"]):
                    _accept_verbose(cls, positional_index=-1)
