import base64
import io
import pathlib
import tarfile

import pytest

from determined import errors
from determined.exec._model_def import extract_model_def


def _archive(*members: tarfile.TarInfo, data: bytes = b"print(1)\n") -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for m in members:
            if m.isfile():
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))
            else:
                tar.addfile(m)
    return base64.b64encode(buf.getvalue()).decode()


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def test_extracts_files_and_inner_links(tmp_path: pathlib.Path) -> None:
    sub = tarfile.TarInfo("pkg")
    sub.type = tarfile.DIRTYPE
    root = extract_model_def(_archive(sub, _file("pkg/model.py"), _link("alias.py", "pkg/model.py")), str(tmp_path))
    assert (root / "pkg" / "model.py").read_text() == "print(1)\n"
    assert (root / "alias.py").read_text() == "print(1)\n"


@pytest.mark.parametrize(
    "member, message",
    [
        (_file("/etc/evil"), "unsafe path"),
        (_file("../evil.py"), "unsafe path"),
        (_file("a/../../evil.py"), "unsafe path"),
        (_link("out", "../../etc/passwd"), "points out of the model directory"),
        (_link("abs", "/etc/passwd"), "absolute path"),
    ],
)
def test_refuses_unsafe_members(tmp_path: pathlib.Path, member: tarfile.TarInfo, message: str) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    with pytest.raises(errors.DeterminedError, match=message):
        extract_model_def(_archive(_file("ok.py"), member), str(dst))
    assert list(dst.iterdir()) == []  # checked before anything is written


def test_refuses_garbage(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.DeterminedError, match="not valid base64"):
        extract_model_def("@@@", str(tmp_path))
    with pytest.raises(errors.DeterminedError, match="not a valid .tar.gz"):
        extract_model_def(base64.b64encode(b"plain text").decode(), str(tmp_path))
