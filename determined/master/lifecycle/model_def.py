"""Checking an uploaded model definition: a base64 .tar.gz holding the entrypoint's module."""
import base64
import binascii
import gzip
import io
import tarfile
from typing import Any, List, Optional, Set

from determined.common.context import unsafe_members
from determined.config.entrypoint import is_trial_class
from determined.config.entrypoint_files import MAX_SOURCE_BYTES, entrypoint_file_problems
from determined.master.problems import RequestProblem
from determined.master.security.request_limits import MODEL_DEF_BYTES, clip, clip_repr

MAX_MODEL_DEF_BYTES = MODEL_DEF_BYTES
MAX_MEMBERS = 100_000
MAX_PATH_BYTES = 4096  # a member's name or link target (PATH_MAX)
MAX_PATH_PARTS = 256  # directories deep
MAX_HEADER_READ = 64 * 1024  # one read of a header extension (a GNU long name, a pax header) holds at most this
MAX_PROBLEMS_SHOWN = 20


def decode_model_def(b64_tgz: object, entrypoint: Any, *, resolve_entrypoint: bool = True) -> bytes:
    """The archive's bytes, after checking size, format, that every member is safe to unpack (no absolute paths,
    `..`, links out of the directory, device files or fifos), that the module of a Trial class entrypoint is
    inside, and (`resolve_entrypoint`: not for a Native API script, which runs `internal.native.command`) that the
    entrypoint resolves to its file and class (config/entrypoint_files.py)."""
    if not isinstance(b64_tgz, str) or not b64_tgz:
        raise RequestProblem(400, "model_definition: a base64-encoded .tar.gz of the model directory is required")
    try:
        data = base64.b64decode(b64_tgz, validate=True)
    except (binascii.Error, ValueError):
        raise RequestProblem(400, "model_definition: not valid base64; send the base64 of a .tar.gz archive") from None
    if len(data) > MAX_MODEL_DEF_BYTES:
        raise RequestProblem(400, f"model_definition: the archive is {len(data) / 2**20:.1f} MB, more than the 96 MB "
                                  "limit; leave data sets and outputs out of the model directory (use .detignore)")
    members = _members(data)
    unsafe = unsafe_members(members)
    if unsafe:
        shown = unsafe[:MAX_PROBLEMS_SHOWN] + ([f"… and {len(unsafe) - MAX_PROBLEMS_SHOWN} more"]
                                               if len(unsafe) > MAX_PROBLEMS_SHOWN else [])
        raise RequestProblem(400, f"model_definition: unsafe archive member {unsafe[0]}", shown)
    names = {_normalise(m.name) for m in members if m.isfile()}
    if is_trial_class(entrypoint):
        _check_entrypoint(entrypoint, names)
    problems = entrypoint_file_problems(entrypoint, names, lambda name: _read_member(data, name)) \
        if resolve_entrypoint else []
    if problems:
        raise RequestProblem(400, "invalid experiment config", problems)
    return data


def _read_member(data: bytes, name: str) -> Optional[bytes]:
    """The bytes of the archive's regular file `name` (its members already checked), or None when it is larger
    than entrypoint_files.MAX_SOURCE_BYTES or absent."""
    with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as unzipped, \
            tarfile.open(fileobj=unzipped, mode="r:") as archive:
        for member in archive:
            if member.isfile() and _normalise(member.name) == name:
                if member.size > MAX_SOURCE_BYTES:
                    return None
                handle = archive.extractfile(member)
                return handle.read(MAX_SOURCE_BYTES) if handle is not None else None
    return None


class _BoundedHeaderReads(io.RawIOBase):
    """The unpacked archive, for tarfile: a read of more than MAX_HEADER_READ bytes at once is refused.

    tarfile reads a member's data only when it is extracted (never here); it reads a GNU long name or a pax header
    whole, in one read of the size the archive claims. Refused, such a header cannot fill the memory.
    """

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self.raw = raw

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > MAX_HEADER_READ:
            raise _HeaderTooLarge(size)
        return self.raw.read(size)  # type: ignore[no-any-return]

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.raw.seek(offset, whence)  # type: ignore[no-any-return]

    def tell(self) -> int:
        return self.raw.tell()  # type: ignore[no-any-return]


class _HeaderTooLarge(Exception):
    pass


def _members(data: bytes) -> List[tarfile.TarInfo]:
    """The archive's members, read one by one: it stops as soon as they unpack to more than the limit, or a
    member's name or header is longer than any real path."""
    members: List[tarfile.TarInfo] = []
    unpacked = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as unzipped, \
                tarfile.open(fileobj=_BoundedHeaderReads(unzipped), mode="r:") as archive:
            for member in archive:
                _check_path(member.name, "a member's name")
                if member.issym() or member.islnk():
                    _check_path(member.linkname, f"the target of the link {clip_repr(member.name, 100)}")
                members.append(member)
                unpacked += member.size if member.isfile() else 0
                if unpacked > MAX_MODEL_DEF_BYTES or len(members) > MAX_MEMBERS:
                    raise RequestProblem(
                        400, f"model_definition: the archive unpacks to more than 96 MB or {MAX_MEMBERS} files; "
                             "leave data sets and outputs out of the model directory (use .detignore)")
    except _HeaderTooLarge:
        raise RequestProblem(400, f"model_definition: a member's header (a long name or a pax header) is larger than "
                                  f"{MAX_HEADER_READ // 1024} KiB; names in a model directory must be shorter than "
                                  f"{MAX_PATH_BYTES} bytes") from None
    except (tarfile.TarError, OSError, EOFError, ValueError, gzip.BadGzipFile):
        raise RequestProblem(400, "model_definition: not a valid .tar.gz archive") from None
    return members


def _check_path(path: str, what: str) -> None:
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES or path.count("/") >= MAX_PATH_PARTS:
        raise RequestProblem(400, f"model_definition: {what} ({clip_repr(path, 100)}) is longer than "
                                  f"{MAX_PATH_BYTES} bytes or deeper than {MAX_PATH_PARTS} directories; rename it or "
                                  "leave it out of the model directory (.detignore)")


def _normalise(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def _check_entrypoint(entrypoint: str, names: Set[str]) -> None:
    module = entrypoint.split(":", 1)[0].strip()
    if not module:
        raise RequestProblem(400, "invalid experiment config", [f"entrypoint: {entrypoint!r} names no module; use module:TrialClass"])
    path = module.replace(".", "/")
    candidates = [f"{path}.py", f"{path}/__init__.py"]
    if not any(c in names for c in candidates):
        listed = ", ".join(clip(n, 100) for n in sorted(names)[:20])
        raise RequestProblem(
            400,
            f"model_definition: the entrypoint module {clip_repr(module, 100)} is not in the model directory",
            [f"entrypoint: expected {clip_repr(candidates[0], 100)} or {clip_repr(candidates[1], 100)} in the model "
             f"directory; it has {listed or 'no files'}"],
        )
