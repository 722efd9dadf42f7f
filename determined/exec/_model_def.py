"""Unpacking an experiment's model definition archive safely."""
import base64
import io
import os
import pathlib
import posixpath
import tarfile

from determined import errors
from determined.common.context import unsafe_members


def _check_member(member: tarfile.TarInfo, root: pathlib.Path) -> None:
    name = member.name
    parts = pathlib.PurePosixPath(name).parts
    if name.startswith("/") or posixpath.isabs(name) or ".." in parts:
        raise errors.DeterminedError(f"model definition archive: refusing the unsafe path {name!r}")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise errors.DeterminedError(
            f"model definition archive: {name!r} is not a regular file, directory or symbolic link"
        )
    if member.issym():
        target = member.linkname
        if posixpath.isabs(target):
            raise errors.DeterminedError(
                f"model definition archive: the link {name!r} points to the absolute path {target!r}"
            )
        resolved = os.path.normpath(os.path.join(root, posixpath.dirname(name), target))
        if os.path.commonpath([str(root), resolved]) != str(root):
            raise errors.DeterminedError(
                f"model definition archive: the link {name!r} -> {target!r} points out of the model directory"
            )


def extract_model_def(b64_tgz: str, dst: str) -> pathlib.Path:
    """Unpack a base64 .tar.gz model dir into the existing empty directory `dst`.

    Absolute paths, `..` components, links out of the directory and special files are refused.
    """
    root = pathlib.Path(dst).resolve()
    try:
        data = base64.b64decode(b64_tgz, validate=True)
    except (ValueError, TypeError) as e:
        raise errors.DeterminedError(f"model definition is not valid base64: {e}") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, root)
            unsafe = unsafe_members(members)  # also links through links, members inside links, hard links
            if unsafe:
                raise errors.DeterminedError(f"model definition archive: refusing unsafe members: {'; '.join(unsafe)}")
            for member in members:
                if member.issym():
                    continue
                tar.extract(member, root, set_attrs=False, filter="data")
            for member in members:
                if member.issym():
                    link = root / member.name
                    link.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(member.linkname, link)
    except tarfile.TarError as e:
        raise errors.DeterminedError(f"model definition is not a valid .tar.gz archive: {e}") from None
    return root
