"""Checking an uploaded model definition: a base64 .tar.gz holding the entrypoint's module."""
import base64
import binascii
import io
import tarfile
from typing import Optional, Set

from determined.master.problems import RequestProblem

MAX_MODEL_DEF_BYTES = 96 * 1024 * 1024


def decode_model_def(b64_tgz: object, entrypoint: Optional[str]) -> bytes:
    """The archive's bytes, after checking size, format and that the entrypoint's module file is inside."""
    if not isinstance(b64_tgz, str) or not b64_tgz:
        raise RequestProblem(400, "model_definition: a base64-encoded .tar.gz of the model directory is required")
    try:
        data = base64.b64decode(b64_tgz, validate=True)
    except (binascii.Error, ValueError):
        raise RequestProblem(400, "model_definition: not valid base64; send the base64 of a .tar.gz archive") from None
    if len(data) > MAX_MODEL_DEF_BYTES:
        raise RequestProblem(400, f"model_definition: the archive is {len(data) / 2**20:.1f} MB, more than the 96 MB "
                                  "limit; leave data sets and outputs out of the model directory (use .detignore)")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            names = {_normalise(m.name) for m in archive.getmembers() if m.isfile()}
    except (tarfile.TarError, OSError, EOFError):
        raise RequestProblem(400, "model_definition: not a valid .tar.gz archive") from None
    if entrypoint:
        _check_entrypoint(entrypoint, names)
    return data


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
