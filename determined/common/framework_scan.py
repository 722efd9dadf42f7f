"""Which deep-learning framework a Trial class uses, read from its source without importing it.

The master (which never imports a framework) and the CLI use it to pick a warm process that has already imported
that framework (determined/exec/forkserver.py). It reads the entrypoint's module and the modules of the model
directory that it imports, transitively (at most MAX_FILES files of at most MAX_FILE_BYTES each), and collects
their `import` statements: `torch`, `determined.pytorch`, `pytorch_lightning` mean torch; `tensorflow`, `keras`,
`determined.keras`, `determined.estimator`, `determined.tensorflow` mean tensorflow. One framework found: that
one; none, both, or a file that cannot be read or parsed: None (the trial starts cold, as before).
"""
import ast
import dataclasses
import gzip
import io
import pathlib
import tarfile
from typing import Callable, Iterable, Optional, Set, Tuple

MAX_FILES = 32
MAX_FILE_BYTES = 2 * 2**20

_FRAMEWORK_MODULES = {
    "torch": ("torch", "determined.pytorch", "pytorch_lightning", "lightning"),
    "tensorflow": ("tensorflow", "keras", "tf_keras", "determined.keras", "determined.estimator",
                   "determined.tensorflow"),
}


def _framework_of_module(name: str) -> Optional[str]:
    for framework, modules in _FRAMEWORK_MODULES.items():
        if any(name == m or name.startswith(m + ".") for m in modules):
            return framework
    return None


MAX_PRELOAD = 64


@dataclasses.dataclass(frozen=True)
class TrialImports:
    """What a Trial class's source imports: its framework, and the modules from outside the model directory (the
    framework's and this platform's excepted), which a warm process may import before it forks the trial."""

    framework: str
    modules: Tuple[str, ...]


def _imported_names(source: bytes) -> Tuple[Set[str], Set[str]]:
    """(modules imported, names a `from` import takes from a module: `determined.pytorch` of `from determined
    import pytorch`)."""
    modules: Set[str] = set()
    names: Set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules, names


def scan_sources(entrypoint: object, read: Callable[[str], Optional[bytes]]) -> Optional[TrialImports]:
    """What the Trial class `entrypoint` (`module:Class`) imports; `read(path)` gives a file of the model
    directory (None when it has none). None unless exactly one framework is found."""
    if not isinstance(entrypoint, str) or ":" not in entrypoint or " " in entrypoint.strip():
        return None  # a command (a script) or no entrypoint: not a Trial class
    pending = [entrypoint.split(":", 1)[0].strip()]
    seen: Set[str] = set()
    found: Set[str] = set()
    outside: Set[str] = set()
    while pending and len(seen) < MAX_FILES:
        module = pending.pop()
        if module in seen or not module:
            continue
        seen.add(module)
        path = module.replace(".", "/")
        source = read(f"{path}.py")
        if source is None:
            source = read(f"{path}/__init__.py")
        if source is None:
            outside.add(module)  # not a module of the model directory
            continue
        try:
            modules, names = _imported_names(source)
        except (SyntaxError, ValueError, RecursionError):
            return None
        for name in modules | names:
            framework = _framework_of_module(name)
            if framework is not None:
                found.add(framework)
            elif name in modules and not name.startswith("determined"):
                pending.append(name)
    if len(found) != 1:
        return None
    preload = sorted(m for m in outside if _framework_of_module(m) is None and not m.startswith("determined"))
    return TrialImports(found.pop(), tuple(preload[:MAX_PRELOAD]))


def framework_of_sources(entrypoint: object, read: Callable[[str], Optional[bytes]]) -> Optional[str]:
    """The framework of the Trial class `entrypoint`, or None (see `scan_sources`)."""
    scan = scan_sources(entrypoint, read)
    return scan.framework if scan is not None else None


def framework_of_archive(model_def: bytes, entrypoint: object) -> Optional[str]:
    """`framework_of_sources` over a model definition archive (.tar.gz bytes, as the master stores it)."""
    scan = scan_archive(model_def, entrypoint)
    return scan.framework if scan is not None else None


def framework_of_directory(model_dir: "str | pathlib.Path", entrypoint: object) -> Optional[str]:
    """`framework_of_sources` over a model directory on disk."""
    scan = scan_directory(model_dir, entrypoint)
    return scan.framework if scan is not None else None


def scan_archive(model_def: bytes, entrypoint: object) -> Optional[TrialImports]:
    """`scan_sources` over a model definition archive (.tar.gz bytes, as the master stores it)."""
    try:
        archive = tarfile.open(fileobj=gzip.GzipFile(fileobj=io.BytesIO(model_def), mode="rb"), mode="r:")
    except (tarfile.TarError, OSError, EOFError):
        return None
    with archive:
        try:
            members = {_normalise(m.name): m for m in archive.getmembers() if m.isfile() and m.size <= MAX_FILE_BYTES}
        except (tarfile.TarError, OSError, EOFError):
            return None

        def read(path: str) -> Optional[bytes]:
            member = members.get(path)
            if member is None:
                return None
            f = archive.extractfile(member)
            return f.read() if f is not None else None

        return scan_sources(entrypoint, read)


def scan_directory(model_dir: "str | pathlib.Path", entrypoint: object) -> Optional[TrialImports]:
    """`scan_sources` over a model directory on disk (the CLI, before it uploads it)."""
    root = pathlib.Path(model_dir)

    def read(path: str) -> Optional[bytes]:
        f = root / path
        try:
            return f.read_bytes() if f.is_file() and f.stat().st_size <= MAX_FILE_BYTES else None
        except OSError:
            return None

    return scan_sources(entrypoint, read)


def _normalise(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


__all__: Iterable[str] = ["TrialImports", "framework_of_archive", "framework_of_directory", "framework_of_sources",
                          "scan_archive", "scan_directory", "scan_sources"]
