import io
import pathlib
import tarfile

import pytest

from determined.common import context


def _names(blob: bytes) -> set:
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers()}


def test_pack_honours_detignore(tmp_path: pathlib.Path) -> None:
    (tmp_path / "model.py").write_text("class T: pass\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"x" * 10)
    (tmp_path / "notes.log").write_text("log")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"")
    (tmp_path / ".detignore").write_text("# comment\ndata/\n*.log\n")
    assert _names(context.pack_model_dir(str(tmp_path))) == {"model.py"}


def test_pack_size_limit_names_largest_files(tmp_path: pathlib.Path) -> None:
    (tmp_path / "model.py").write_text("x = 1\n")
    (tmp_path / "weights.bin").write_bytes(b"0" * 3000)
    with pytest.raises(context.ContextError) as e:
        context.pack_model_dir(str(tmp_path), limit=1000)
    assert "weights.bin" in str(e.value) and ".detignore" in str(e.value)


def test_check_entrypoint(tmp_path: pathlib.Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "trial.py").write_text("import os\nclass MyTrial:\n    pass\nclass Other:\n    pass\n")
    context.check_entrypoint(str(tmp_path), "pkg.trial:MyTrial")
    with pytest.raises(context.ContextError, match="classes defined there: MyTrial, Other"):
        context.check_entrypoint(str(tmp_path), "pkg.trial:Missing")
    with pytest.raises(context.ContextError, match="no module 'nope'"):
        context.check_entrypoint(str(tmp_path), "nope:MyTrial")
    # Determined 0.38's rule: anything but `module:Class` is a command, which may name anything the trial has
    context.check_entrypoint(str(tmp_path), "pkg.trial.MyTrial")
    context.check_entrypoint(str(tmp_path), ["python3", "train.py"])
    (tmp_path / "broken.py").write_text("class (:\n")
    with pytest.raises(context.ContextError, match="syntax error at line 1"):
        context.check_entrypoint(str(tmp_path), "broken:X")
