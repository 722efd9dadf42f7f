"""`det.import_from_path(path)`: import modules from a directory (a checkpoint's code) next to the current ones."""
import contextlib
import os
import sys
import threading
from typing import Dict, Iterator, Set

_active = threading.Lock()


def _modules_from(directory: str) -> Set[str]:
    """The names in sys.modules of modules loaded from `directory` (and their submodules), and cached misses."""
    root = os.path.abspath(directory)
    found: Set[str] = set()
    for name, module in sorted(sys.modules.items()):  # a package before its submodules
        if module is None:  # a cached failed import: it may succeed from the new path
            found.add(name)
            continue
        file = getattr(module, "__file__", None)
        if not file:
            continue
        folder, base = os.path.split(os.path.abspath(file))
        if base == "__init__.py":
            folder = os.path.dirname(folder)
        if folder == root or name.rpartition(".")[0] in found:
            found.add(name)
    return found


@contextlib.contextmanager
def import_from_path(path: "str | os.PathLike[str]") -> Iterator[None]:
    """Import from `path` inside the block, as if it were the only code directory.

    Modules of the current directory are hidden for the block (taken out of `sys.path` and `sys.modules`,
    and put back afterwards), `path` comes first in `sys.path`, and no `__pycache__` is written into it. On
    exit the modules loaded from `path` are dropped, so that

        import model_def                        # today's code
        with det.import_from_path(checkpoint_dir / "code"):
            import model_def as old_model_def   # the checkpoint's own copy, a separate module

    gives two modules. It cannot be nested or used from two threads at once (RuntimeError).
    """
    if not _active.acquire(blocking=False):
        raise RuntimeError("det.import_from_path cannot be nested or used by two threads at once")
    try:
        directory = os.path.abspath(os.fspath(path))
        cwd = os.getcwd()
        saved_path = list(sys.path)
        saved_bytecode = sys.dont_write_bytecode
        hidden: Dict[str, object] = {}
        for name in _modules_from(cwd):
            if name != "determined" and not name.startswith("determined."):  # the platform stays one copy
                hidden[name] = sys.modules.pop(name)
        sys.path[:] = [directory] + [p for p in saved_path if p not in ("", ".", cwd)]
        sys.dont_write_bytecode = True
        try:
            yield
        finally:
            for name in _modules_from(directory):
                sys.modules.pop(name, None)
            sys.path[:] = saved_path
            sys.dont_write_bytecode = saved_bytecode
            sys.modules.update(hidden)  # type: ignore[arg-type]
    finally:
        _active.release()
