"""Packing a model (context) directory into the archive that travels to the master and the trials."""
import ast
import base64
import collections
import fnmatch
import io
import os
import pathlib
import posixpath
import tarfile
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from determined import errors
from determined.common.trial_class_entrypoint import is_trial_class

MAX_CONTEXT_BYTES = 96 * 1024 * 1024
ALWAYS_IGNORED = ("__pycache__", "*.pyc", ".detignore")


class ContextError(errors.DeterminedError):
    """The model directory cannot be used as an experiment's context."""


def _read_detignore(root: pathlib.Path) -> List[str]:
    path = root / ".detignore"
    if not path.exists():
        return []
    patterns = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append(line)
    return patterns


def _ignored(rel: str, is_dir: bool, patterns: List[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    for pat in list(ALWAYS_IGNORED) + patterns:
        dir_only = pat.endswith("/")
        pat = pat.rstrip("/")
        if dir_only and not is_dir:
            continue
        anchored = pat.startswith("/")
        pat = pat.lstrip("/")
        if "/" in pat or anchored:
            if fnmatch.fnmatch(rel, pat):
                return True
        elif fnmatch.fnmatch(name, pat):
            return True
    return False


def list_context_files(model_dir: str) -> List[Tuple[str, pathlib.Path]]:
    """The (archive name, path) pairs of a model dir, honouring `.detignore` (gitignore-style patterns)."""
    root = pathlib.Path(model_dir)
    if not root.is_dir():
        raise ContextError(f"model directory {model_dir!r} does not exist or is not a directory")
    patterns = _read_detignore(root)
    found: List[Tuple[str, pathlib.Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = pathlib.Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not _ignored(rel_dir + d, True, patterns))
        for f in sorted(filenames):
            rel = rel_dir + f
            full = pathlib.Path(dirpath) / f
            if _ignored(rel, False, patterns) or not (full.is_file() or full.is_symlink()):
                continue
            found.append((rel, full))
    return found


_LINK = ""  # the key of a link's target in a node of the links tree (a path part is never empty)
_LinkTree = Dict[str, Any]


def _parts(path: str) -> Tuple[str, ...]:
    """The parts of a POSIX path as pathlib gives them (`/` first when absolute; empty and `.` parts dropped), in one
    split: pathlib is slow on paths of hundreds of parts."""
    parts = tuple(p for p in path.split("/") if p and p != ".")
    return ("/",) + parts if path.startswith("/") else parts


def _link_tree(links: Dict[str, str]) -> _LinkTree:
    """The archive's symbolic links as a tree of path parts, so that a lookup costs the length of one path."""
    root: _LinkTree = {}
    for path, target in links.items():
        node = root
        for part in _parts(path):
            node = node.setdefault(part, {})
        node[_LINK] = target
    return root


def _inside_link(parts: Sequence[str], tree: _LinkTree) -> bool:
    """Whether a directory above the member with these path parts is one of the archive's links."""
    node: Optional[_LinkTree] = tree
    for part in parts[:-1]:
        node = node.get(part) if node is not None else None
        if node is None:
            return False
        if _LINK in node:
            return True
    return False


def _resolves_outside(path: str, tree: _LinkTree) -> bool:
    """Whether `path` (relative to the archive root) leaves the root once the archive's own links are followed."""
    todo = collections.deque(_parts(path))
    nodes: List[Optional[_LinkTree]] = [tree]  # the tree node of each resolved part (None: no link below it)
    hops = 0
    while todo:
        part = todo.popleft()
        if part in ("", "."):
            continue
        if part.startswith("/"):
            return True
        if part == "..":
            if len(nodes) == 1:
                return True
            nodes.pop()
            continue
        node = nodes[-1]
        child = node.get(part) if node is not None else None
        if child is not None and _LINK in child:
            hops += 1
            if hops > 40 or child[_LINK].startswith("/"):
                return True
            todo.extendleft(reversed(_parts(child[_LINK])))
            continue
        nodes.append(child)
    return False


def member_name(name: str) -> str:
    """An archive member's name without leading `./`."""
    while name.startswith("./"):
        name = name[2:]
    return name


def unsafe_members(members: Sequence[tarfile.TarInfo]) -> List[str]:
    """Why each unsafe member of a model archive is unsafe: absolute paths, `..`, links that lead out of the
    directory (or through another link), device files, fifos and other special files. Empty when all are safe.
    """
    problems: List[str] = []
    links = _link_tree({member_name(m.name).rstrip("/"): m.linkname for m in members if m.issym()})
    files: Set[str] = set()
    for m in members:
        name = member_name(m.name)
        parts = _parts(name)
        parent = "/".join(parts[:-1])
        if name.startswith("/") or ".." in parts:
            problems.append(f"{m.name!r}: an absolute path or a '..' component")
        elif not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            kind = "a device file" if (m.ischr() or m.isblk()) else "a fifo" if m.isfifo() else "a special file"
            problems.append(f"{m.name!r}: {kind}; only regular files, directories and links may be uploaded")
        elif _inside_link(parts, links):
            problems.append(f"{m.name!r}: lies inside a symbolic link of the archive")
        elif m.issym() and (m.linkname.startswith("/") or _resolves_outside(posixpath.join(parent, m.linkname), links)):
            problems.append(f"{m.name!r}: a symbolic link to {m.linkname!r}, outside the model directory")
        elif m.islnk():
            target = member_name(m.linkname)
            if target.startswith("/") or ".." in _parts(target) or target not in files:
                problems.append(f"{m.name!r}: a hard link to {m.linkname!r}, not a file earlier in the archive")
        if m.isfile():
            files.add(name)
    return problems


def pack_model_dir(model_dir: str, limit: int = MAX_CONTEXT_BYTES) -> bytes:
    """A gzipped tar of the model dir; raises ContextError naming the largest files when over `limit`."""
    files = list_context_files(model_dir)
    sizes = [(rel, p.lstat().st_size) for rel, p in files]
    total = sum(s for _, s in sizes)
    if total > limit:
        biggest = sorted(sizes, key=lambda x: -x[1])[:5]
        listing = ", ".join(f"{rel} ({s / 2**20:.1f} MiB)" for rel, s in biggest)
        raise ContextError(
            f"model directory {model_dir!r} holds {total / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB limit; "
            f"largest files: {listing}. List files the trial does not need in a .detignore file."
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for rel, path in files:
            tar.add(str(path), arcname=rel, recursive=False)
        problems = unsafe_members(tar.getmembers())
    if problems:
        raise ContextError(
            f"model directory {model_dir!r} cannot be uploaded: {'; '.join(problems[:5])}. Copy what the trial "
            "needs into the directory, or list those entries in a .detignore file."
        )
    return buf.getvalue()


def pack_model_dir_b64(model_dir: str) -> str:
    return base64.b64encode(pack_model_dir(model_dir)).decode("ascii")


def _module_file(model_dir: pathlib.Path, module: str) -> Optional[pathlib.Path]:
    base = model_dir.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(source: str) -> Tuple[List[str], List[str]]:
    """Names bound at module level, and the subset that are class definitions."""
    tree = ast.parse(source)
    names: List[str] = []
    classes: List[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
            classes.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.extend((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
    return names, classes


def check_entrypoint(model_dir: str, entrypoint: Any) -> None:
    """Check, without importing user code, that `module:Class` names a class defined in the model dir (a
    command entrypoint is not checked: it may name anything the trial's environment has)."""
    if not is_trial_class(entrypoint):
        return
    module, cls = entrypoint.split(":")
    root = pathlib.Path(model_dir)
    path = _module_file(root, module)
    if path is None:
        rel = module.replace(".", "/")
        pys = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))[:10]
        raise ContextError(
            f"entrypoint {entrypoint!r}: no module {module!r} in model directory {str(root)!r} "
            f"(looked for {rel}.py and {rel}/__init__.py); Python files there: {', '.join(pys) or 'none'}"
        )
    try:
        names, classes = _top_level_names(path.read_text())
    except SyntaxError as e:
        raise ContextError(f"entrypoint {entrypoint!r}: {path} has a syntax error at line {e.lineno}: {e.msg}") from None
    if cls not in names:
        raise ContextError(
            f"entrypoint {entrypoint!r}: {path.name} defines no {cls!r}; classes defined there: "
            f"{', '.join(classes) or 'none'}. Set `entrypoint` to 'module:ClassName' of your Trial class."
        )
