"""Run a function right after a module is first imported, without importing it.

The compatibility shims of NumPy and TensorFlow patch those libraries. A trial that never imports them should
not pay their import (NumPy's is tens of milliseconds, TensorFlow's seconds), so the shims are installed the
moment the user's code imports the library: `call_after_import("numpy", install)` calls `install()` at once when
NumPy is already imported, and otherwise right after the module `numpy` has been executed, before the import
statement that asked for it returns. The hook finds nothing itself: it asks the other finders for the module's
spec and wraps that spec's loader for one execution, then removes itself.
"""
import importlib.abc
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence

_lock = threading.Lock()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls the callbacks registered for `name` right after the module `name` has been executed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.callbacks: List[Callable[[], None]] = []

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            original(module)
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass
            for callback in self._take():
                callback()

        loader.exec_module = exec_module
        return spec

    def _take(self) -> List[Callable[[], None]]:
        with _lock:
            _hooks.pop(self.name, None)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            callbacks, self.callbacks = self.callbacks, []
        return callbacks


_hooks: Dict[str, _AfterImport] = {}


def call_after_import(name: str, callback: Callable[[], None]) -> None:
    """Call `callback()` now if the top-level module `name` is imported, else right after it first is."""
    with _lock:
        if name not in sys.modules:
            hook = _hooks.get(name)
            if hook is None:
                hook = _hooks[name] = _AfterImport(name)
                sys.meta_path.insert(0, hook)
            hook.callbacks.append(callback)
            return
    callback()


def waiting(name: str) -> bool:
    """Whether callbacks wait for the module `name` to be imported."""
    with _lock:
        return name in _hooks
