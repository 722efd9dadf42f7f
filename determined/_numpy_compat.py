"""NumPy's old type aliases (`np.int`, `np.float`, `np.bool`, ...), for Trial code written for Determined 0.12-0.26.

NumPy 1.20 deprecated the aliases of Python's builtin types and 1.24 removed them, so code of that era that wrote
`labels.astype(np.int)` or `np.zeros(n, dtype=np.bool)` now raises `AttributeError: module 'numpy' has no
attribute 'int'`. Those aliases were the builtins themselves (`np.int is int`), so restoring them changes nothing
else. `install()` adds each missing one to the imported NumPy; a name NumPy defines (NumPy 2's `np.long`, an
int64 type) is left alone. The trial loader and the Native API runner install them before a user's code runs.
"""
import threading

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

_lock = threading.Lock()
_installed = False


def _defined(np: object, name: str) -> bool:
    # NumPy 1.24-1.26 answer a removed alias through the module's __getattr__ (an AttributeError naming the
    # builtin); only what is really in the module's namespace counts as defined.
    return name in vars(np)


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
