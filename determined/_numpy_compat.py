"""NumPy's old type aliases (`np.int`, `np.float`, `np.bool`, ...), for Trial code written for Determined 0.12-0.26.

NumPy 1.20 deprecated the aliases of Python's builtin types and 1.24 removed them, so code of that era that wrote
`labels.astype(np.int)` or `np.zeros(n, dtype=np.bool)` now raises `AttributeError: module 'numpy' has no
attribute 'int'`. Those aliases were the builtins themselves (`np.int is int`), so restoring them changes nothing
else. `install()` adds each missing one to the imported NumPy; a name NumPy defines (NumPy 2's `np.long`, an
int64 type) is left alone. The trial loader installs them before a user's code runs; the Native API runner
right after the script imports NumPy (`install_when_imported`).

`np.sum(generator)` too: NumPy 1.x summed a generator with Python's `sum` (with a DeprecationWarning since 1.15), and
code of that era counts parameters with `np.sum(np.prod(v.size()) for v in model.parameters())`; NumPy 2.4 raises
`TypeError: Calling np.sum(generator) is deprecated`. Where the installed NumPy refuses it, `np.sum` given a
generator does what NumPy 1.x did (the warning, Python's `sum`, the result written to `out` when given); every other
call is NumPy's own.
"""
import builtins
import functools
import threading
import types
import warnings
from typing import Any

from determined.common.import_hooks import call_after_import

_ALIASES = {
    "int": int,
    "float": float,
    "bool": bool,
    "complex": complex,
    "object": object,
    "str": str,
    "long": int,
    "unicode": str,
}

_lock = threading.RLock()  # install() imports NumPy, whose import hook (install_when_imported) calls install()
_installed = False


def _defined(np: object, name: str) -> bool:
    # NumPy 1.24-1.26 answer a removed alias through the module's __getattr__ (an AttributeError naming the
    # builtin); only what is really in the module's namespace counts as defined.
    return name in vars(np)


def _sums_generators(np: Any) -> bool:
    try:
        np.sum(x for x in (1, 2))
    except TypeError:
        return False
    return True


def _sum_accepting_generators(np_sum: Any) -> Any:
    @functools.wraps(np_sum)
    def sum(a: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A001 -- numpy.sum's own name
        if not isinstance(a, types.GeneratorType):
            return np_sum(a, *args, **kwargs)
        warnings.warn("Calling np.sum(generator) is deprecated: use np.sum(np.fromiter(generator)) or the "
                      "python sum builtin instead (NumPy 1.x's behaviour, kept for code of that era)",
                      DeprecationWarning, stacklevel=2)
        total = builtins.sum(a)
        out = kwargs.get("out", args[2] if len(args) > 2 else None)
        if out is not None:
            out[...] = total
            return out
        return total

    sum._det_sums_generators = True  # type: ignore[attr-defined]
    return sum


def install() -> None:
    """Add NumPy's removed builtin-type aliases to the imported NumPy (idempotent; needs NumPy installed)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        try:
            import numpy as np
        except ImportError:
            return
        for name, builtin in _ALIASES.items():
            if not _defined(np, name):
                setattr(np, name, builtin)
        np_sum = getattr(np, "sum", None)
        if callable(np_sum) and not getattr(np_sum, "_det_sums_generators", False) and not _sums_generators(np):
            np.sum = _sum_accepting_generators(np_sum)


def install_when_imported() -> None:
    """`install()` now if NumPy is imported, else right after the trial's code first imports it (a trial that
    never uses NumPy does not pay its import)."""
    call_after_import("numpy", install)
