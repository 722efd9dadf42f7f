"""Reading a checkpoint directory without following a symbolic link out of it.

Whoever wrote a checkpoint (a trial's code) may have put links in it, or replaced the checkpoint directory itself by
a link, to make a more privileged reader (the master, an admin's download) read or copy what the link points at.
Here every directory is opened relative to its parent's descriptor with O_NOFOLLOW (a link swapped in meanwhile
fails to open instead of being followed), every file is opened the same way and read only if the opened
descriptor is a regular file, and links are reported as links: `LINK` when its target, resolved inside the tree as
the kernel would (through other links of the tree, `..` after them), stays inside the checkpoint; `OUTSIDE_LINK`
otherwise (an absolute target, one that climbs out, a chain of more than 40 links). Callers keep the first as a
link and skip the second, saying so; no caller ever writes a link's target in place of the link.
"""
import errno
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

from determined import errors

DIR, FILE, LINK, OUTSIDE_LINK, OTHER = "dir", "file", "link", "outside-link", "other"
MAX_ENTRIES = 200_000  # files, directories and links of one checkpoint
MAX_DEPTH = 256
_MAX_LINK_HOPS = 40  # as the kernel's
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# A directory only walked through (never listed): O_PATH needs search (x) permission alone, so a trial that may
# open its checkpoint inside a storage directory of mode 1733/0711 is not refused for want of reading the parents.
_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Entry:
    """One entry of a stored checkpoint: `path` relative to it, '/'-separated; `target` a link's target;
    `open()` (files only) a binary file of exactly `size` bytes, to read before the next entry is asked for."""

    path: str
    kind: str
    size: int = 0
    mtime: float = 0.0
    mode: int = 0o644
    target: str = ""
    open: Optional[Callable[[], BinaryIO]] = None


class LinkedCheckpoint(errors.DeterminedError):
    """The checkpoint directory is itself a symbolic link (or not a directory): it is not read."""


def open_dir_nofollow(path: "str | os.PathLike[str]") -> int:
    """A descriptor of the absolute directory `path`, opened one component at a time without following a link
    (the path must be free of links, as a resolved storage directory is). Raises OSError (ELOOP: a link).
    The descriptor is an O_PATH one (search permission suffices): use it only as the `dir_fd` of other calls."""
    parts = [p for p in os.fspath(path).split("/") if p]
    fd = os.open("/", _PATH_FLAGS)
    try:
        for part in parts:
            child = os.open(part, _PATH_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_checkpoint_dir(base_fd: int, storage_id: str, shown: str) -> int:
    """The descriptor of the checkpoint directory `storage_id` in the storage directory `base_fd`; refuses a link.
    `shown`: the path named in errors."""
    try:
        return os.open(storage_id, _DIR_FLAGS, dir_fd=base_fd)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise errors.DeterminedError(f"checkpoint {storage_id} is not in storage (looked for {shown})") from None
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LinkedCheckpoint(f"checkpoint {storage_id}: {shown} is a symbolic link or not a directory, not a "
                                   "checkpoint directory; it is not read (checkpoints are directories their trial "
                                   "wrote)") from None
        raise


def _open_beneath(top_fd: int, rel_dir: str) -> Optional[int]:
    """The directory `rel_dir` under `top_fd`, each component opened without following a link (None: it is no
    longer a directory there)."""
    fd = os.dup(top_fd)
    try:
        for part in [p for p in rel_dir.split("/") if p]:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError:
        os.close(fd)
        return None
    return fd


def _scan(top_fd: int) -> List[Tuple[str, str, os.stat_result, str]]:
    """`(path, kind, lstat, link target)` of every entry under `top_fd`, depth first, names sorted; each directory
    is opened from `top_fd` without following links when its turn comes (one replaced by a link since it was
    listed is not entered)."""
    out: List[Tuple[str, str, os.stat_result, str]] = []
    stack: List[str] = [""]
    while stack:
        rel = stack.pop()
        if rel.count("/") >= MAX_DEPTH:
            raise errors.DeterminedError(f"the checkpoint nests directories more than {MAX_DEPTH} deep (at "
                                         f"{rel[:200]!r}); it is not read")
        fd = _open_beneath(top_fd, rel)
        if fd is None:
            continue
        children: List[str] = []
        try:
            for name in sorted(os.listdir(fd)):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if len(out) >= MAX_ENTRIES:
                    raise errors.DeterminedError(f"the checkpoint holds more than {MAX_ENTRIES} files, directories "
                                                 "and links; it is not read")
                path = f"{rel}{name}"
                if stat.S_ISLNK(st.st_mode):
                    try:
                        out.append((path, LINK, st, os.readlink(name, dir_fd=fd)))
                    except OSError:
                        continue
                elif stat.S_ISDIR(st.st_mode):
                    out.append((path, DIR, st, ""))
                    children.append(path + "/")
                else:
                    out.append((path, FILE if stat.S_ISREG(st.st_mode) else OTHER, st, ""))
        finally:
            os.close(fd)
        stack.extend(reversed(children))
    return out


def _resolves_inside(path: str, links: Dict[str, str]) -> bool:
    """Whether the link at `path` (relative to the checkpoint) resolves inside it, following the tree's own links
    as the kernel would (a component is resolved before a following '..' is applied)."""
    if posixpath.isabs(links[path]):
        return False
    pending = links[path].split("/")
    current = path.split("/")[:-1]
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return False
            current.pop()
            continue
        candidate = "/".join(current + [part])
        target = links.get(candidate)
        if target is None:
            current.append(part)
            continue
        hops += 1
        if hops > _MAX_LINK_HOPS or posixpath.isabs(target):
            return False
        pending = target.split("/") + pending
    return True


def read_tree(top_fd: int) -> Iterator[Entry]:
    """The entries of the checkpoint directory `top_fd` (see the module's docstring), depth first.

    The tree is listed once and links are judged on that listing; a file is opened only when its entry is read,
    relative to its directory opened again from `top_fd` without following links; one that is no longer a regular
    file then is skipped."""
    scanned = _scan(top_fd)
    links = {path: target for path, kind, _st, target in scanned if kind == LINK}
    dir_cache: Dict[str, int] = {}
    reading = [True]  # false once the iteration ended: `top_fd` may be closed (and its number reused) by then

    def dir_fd(rel_dir: str) -> Optional[int]:
        if rel_dir not in dir_cache:
            for old in dir_cache.values():
                os.close(old)
            dir_cache.clear()
            fd = _open_beneath(top_fd, rel_dir)
            if fd is None:
                return None
            dir_cache[rel_dir] = fd
        return dir_cache[rel_dir]

    def opener(rel_dir: str, name: str, size: int) -> Callable[[], BinaryIO]:
        def open_file() -> BinaryIO:
            if not reading:
                raise errors.DeterminedError(f"{posixpath.join(rel_dir, name)} was opened after its checkpoint's "
                                             "entries were read to the end")
            parent = dir_fd(rel_dir)
            if parent is None:
                raise errors.DeterminedError(f"{rel_dir} changed while it was read (a link replaced a directory)")
            fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                raise errors.DeterminedError(f"{posixpath.join(rel_dir, name)} is no longer a regular file")
            os.set_blocking(fd, True)
            return _Exact(os.fdopen(fd, "rb"), size)

        return open_file

    try:
        for path, kind, st, target in scanned:
            if kind == LINK:
                kind = LINK if _resolves_inside(path, links) else OUTSIDE_LINK
                yield Entry(path, kind, mtime=st.st_mtime, target=target)
            elif kind == FILE:
                rel_dir, name = posixpath.split(path)
                yield Entry(path, FILE, size=st.st_size, mtime=st.st_mtime, mode=stat.S_IMODE(st.st_mode) & 0o777,
                            open=opener(rel_dir, name, st.st_size))
            else:
                yield Entry(path, kind, mtime=st.st_mtime, mode=stat.S_IMODE(st.st_mode) & 0o777)
    finally:
        reading.clear()
        for fd in dir_cache.values():
            os.close(fd)


class _Exact:
    """A file read as exactly `size` bytes (the size listed): never more, and an error if it shrank meanwhile."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f = f
        self._left = size

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        want = self._left if n is None or n < 0 else min(n, self._left)
        data = self._f.read(want)
        if not data:
            raise errors.DeterminedError("a checkpoint file shrank while it was read")
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "_Exact":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def copy_entries(entries: Iterator[Entry], dst: str) -> List[Entry]:
    """Write `entries` into the directory `dst` (created when missing): directories, files, the links that stay
    inside (as links); returns the entries skipped (links leading out, fifos and devices). Never follows a link
    in `dst` either: each path is created fresh beside what was written before."""
    os.makedirs(dst, exist_ok=True)
    skipped: List[Entry] = []
    for entry in entries:
        target = os.path.join(dst, *entry.path.split("/"))
        if entry.kind == DIR:
            try:
                os.mkdir(target, 0o755)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(target).st_mode):
                    raise errors.DeterminedError(f"cannot write {target}: something other than a directory is there")
        elif entry.kind == FILE and entry.open is not None:
            with entry.open() as src:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, entry.mode & 0o755 or 0o644)
                with os.fdopen(fd, "wb") as out:
                    while True:
                        chunk = src.read(1 << 20)
                        if not chunk:
                            break
                        out.write(chunk)
        elif entry.kind == LINK:
            if os.path.lexists(target) and not stat.S_ISDIR(os.lstat(target).st_mode):
                os.unlink(target)  # an earlier copy's file or link (never followed)
            os.symlink(entry.target, target)
        else:
            skipped.append(entry)
    return skipped


def describe_skipped(skipped: List[Entry]) -> str:
    """One line naming the links and special files left out of a copy (at most 5 named)."""
    shown = [f"{e.path} -> {e.target}" if e.kind == OUTSIDE_LINK else f"{e.path} (not a file)" for e in skipped[:5]]
    more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return (f"left out {len(skipped)} entr{'y' if len(skipped) == 1 else 'ies'} that are not files of the checkpoint "
            f"(links leading out of it, fifos, devices): {', '.join(shown)}{more}")


__all__ = ["DIR", "FILE", "LINK", "OUTSIDE_LINK", "OTHER", "Entry", "LinkedCheckpoint", "copy_entries",
           "describe_skipped", "open_checkpoint_dir", "open_dir_nofollow", "read_tree"]
