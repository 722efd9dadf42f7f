"""Checking an uploaded model definition: a base64 .tar.gz holding the entrypoint's module."""
import base64
import binascii
import io
import tarfile
from typing import Any, List, Set

from determined.common.context import unsafe_members
from determined.config.entrypoint import is_trial_class
from determined.master.problems import RequestProblem

MAX_MODEL_DEF_BYTES = 96 * 1024 * 1024
MAX_MEMBERS = 100_000


def decode_model_def(b64_tgz: object, entrypoint: Any) -> bytes:
    """The archive's bytes, after checking size, format, that every member is safe to unpack (no absolute paths,
    `..`, links out of the directory, device files or fifos) and that the module of a Trial class entrypoint is
    inside (a command's files are the command's business)."""
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
        raise RequestProblem(400, f"model_definition: unsafe archive member {unsafe[0]}", unsafe)
    names = {_normalise(m.name) for m in members if m.isfile()}
    if is_trial_class(entrypoint):
        _check_entrypoint(entrypoint, names)
    return data


def _members(data: bytes) -> List[tarfile.TarInfo]:
    """The archive's members, read one by one: it stops as soon as they unpack to more than the limit."""
    members: List[tarfile.TarInfo] = []
    unpacked = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for member in archive:
                members.append(member)
                unpacked += member.size if member.isfile() else 0
                if unpacked > MAX_MODEL_DEF_BYTES or len(members) > MAX_MEMBERS:
                    raise RequestProblem(
                        400, f"model_definition: the archive unpacks to more than 96 MB or {MAX_MEMBERS} files; "
                             "leave data sets and outputs out of the model directory (use .detignore)")
    except (tarfile.TarError, OSError, EOFError, ValueError):
        raise RequestProblem(400, "model_definition: not a valid .tar.gz archive") from None
    return members


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
        raise RequestProblem(
            400,
            f"model_definition: the entrypoint module {module!r} is not in the model directory",
            [f"entrypoint: expected {candidates[0]} or {candidates[1]} in the model directory; "
             f"it has {', '.join(sorted(names)[:20]) or 'no files'}"],
        )
