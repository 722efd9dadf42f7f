"""Whether the entrypoint resolves to a file of the model directory, known at submit without running anything.

* A Trial class `module:Class` (also behind a launcher's `--trial module:Class`): its module is in the model
  directory, it parses, and it binds `Class` at its top level (a class, an import, an assignment; read with `ast`,
  never imported). A module that can bind names in ways `ast` cannot follow (`from x import *`, a module
  `__getattr__`, writes to `globals()`) is given the benefit of the doubt.
* A command: a Python file it runs directly (`python3 train.py`, `python3 -m determined.launch.torch_distributed
  python3 train.py`, `torchrun ... train.py`), given as a relative path, is in the model directory. Commands whose
  files the shell decides (`cd`, `&&`, `$VAR`, globs...) and model directories with a `startup-hook.sh` (which may
  make files) are not checked.

Each problem names the entrypoint, what is missing and the fix, as the config errors do.
"""
import ast
import posixpath
import re
import shlex
from typing import Callable, Iterator, List, Optional, Set, Tuple

from determined.common.trial_class_entrypoint import is_trial_class
from determined.config.entrypoint import launched_trial_class

# A module larger than this is not parsed (its class is looked for when the trial starts).
MAX_SOURCE_BYTES = 4 * 1024 * 1024
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_PYTHON_FLAGS = {"-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-b", "-bb", "-q", "-v", "-d", "-R", "-x"}
_LAUNCHERS = ("torchrun", "deepspeed")  # `<launcher> [its options] script.py [args]`
_SHELL_DECIDES = re.compile(r"[;&|$`*?~(){}<>]|\bcd\b")
STARTUP_HOOK = "startup-hook.sh"
_DYNAMIC = ("globals", "vars", "setattr", "exec")

Reader = Callable[[str], Optional[bytes]]


def entrypoint_file_problems(entrypoint: object, names: Set[str], read: Reader) -> List[str]:
    """Problems of `entrypoint` against the model directory's files: `names` (normalised relative paths of its
    regular files) and `read(name)` (a file's bytes, or None when it is too large to read)."""
    trial_class = entrypoint if isinstance(entrypoint, str) and is_trial_class(entrypoint) else \
        launched_trial_class(entrypoint)
    if trial_class:
        return _trial_class_problems(str(trial_class), names, read)
    if STARTUP_HOOK in names:
        return []
    missing = [path for path in _python_files_run(entrypoint) if _normal(path) not in names]
    listed = ", ".join(sorted(n for n in names if n.endswith(".py"))[:10]) or "no Python files"
    return [f"entrypoint: runs {path!r}, which is not in the model directory (it has {listed}); give the path of "
            f"the script relative to the model directory, or add the file" for path in missing[:1]]


def _normal(path: str) -> str:
    return posixpath.normpath(path)


def _trial_class_problems(trial_class: str, names: Set[str], read: Reader) -> List[str]:
    module, _, name = trial_class.partition(":")
    base = module.replace(".", "/")
    candidates = [f"{base}.py", f"{base}/__init__.py"]
    path = next((c for c in candidates if c in names), None)
    if path is None:
        return [f"entrypoint: the module {module!r} of {trial_class!r} is not in the model directory (expected "
                f"{candidates[0]} or {candidates[1]}); give the module's path from the model directory's top, with "
                "dots for directories"]
    source = read(path)
    if source is None:
        return []
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        return [f"entrypoint: {path} does not parse: {e.msg} (line {e.lineno}); fix the syntax error"]
    except (ValueError, MemoryError, RecursionError):
        return []
    bound, dynamic = _top_level_names(tree.body)
    if dynamic or name in bound:
        return []
    classes = sorted(n.name for n in tree.body if isinstance(n, ast.ClassDef))
    defined = f"its top-level classes are {', '.join(classes)}" if classes else "it defines no top-level class"
    return [f"entrypoint: {path} has no top-level {name!r} ({defined}); name the Trial class as `{module}:ClassName`"]


def _top_level_names(body: List[ast.stmt]) -> Tuple[Set[str], bool]:
    """Names a module binds at its top level (also inside top-level if/try/with/for), and whether it may bind
    others that `ast` cannot see."""
    bound: Set[str] = set()
    dynamic = False
    for node in _top_level_statements(body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
            dynamic = dynamic or node.name == "__getattr__"
            continue
        if any(isinstance(n, ast.Name) and n.id in _DYNAMIC for n in ast.walk(node)):
            dynamic = True  # globals()[...] = ..., setattr(module, ...), exec(...) at the top level
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    dynamic = True
                bound.add(alias.asname or alias.name.split(".")[0])
        # Assignments, for/with targets, `:=`: any name stored to (within a nested def too: more names, fewer
        # false alarms).
        bound.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return bound, dynamic


def _top_level_statements(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.AsyncWith, ast.AsyncFor)):
            yield from _top_level_statements(node.body)
            yield from _top_level_statements(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            yield from _top_level_statements(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                yield from _top_level_statements(handler.body)
            yield from _top_level_statements(node.orelse)  # type: ignore[attr-defined]
            yield from _top_level_statements(node.finalbody)  # type: ignore[attr-defined]


def _python_files_run(entrypoint: object) -> List[str]:
    """Relative paths of the Python files a command runs directly; none when the shell decides them."""
    if isinstance(entrypoint, list):
        words = [str(w) for w in entrypoint]
    elif isinstance(entrypoint, str):
        if _SHELL_DECIDES.search(entrypoint):
            return []
        try:
            words = shlex.split(entrypoint)
        except ValueError:
            return []
    else:
        return []
    found: List[str] = []
    for i, word in enumerate(words):
        program = posixpath.basename(word)
        if _PYTHON.fullmatch(program):
            j = i + 1
            while j < len(words) and words[j] in _PYTHON_FLAGS:
                j += 1
            script = words[j] if j < len(words) else ""
        elif program in _LAUNCHERS:
            script = next((w for w in words[i + 1:] if w.endswith(".py")), "")
        else:
            continue
        if script.endswith(".py") and not script.startswith(("/", "-")) and ".." not in script.split("/"):
            found.append(script)
    return found
