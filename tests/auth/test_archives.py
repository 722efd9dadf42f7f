"""Hostile model archives are refused by the master (400 naming the member, nothing stored) and by the trial
side; the client's packer keeps to the 96 MB limit, honours .detignore and refuses links out of the dir."""
import base64
import gzip
import io
import os
import pathlib
import tarfile
from typing import Callable, Dict

import pytest

from determined import errors
from determined.common import context
from determined.exec._model_def import extract_model_def

from tests.master._helpers import config

from ._helpers import InProcessMaster

MODEL = b"class T:\n    pass\n"


def _archive(add: Callable[[tarfile.TarFile], None]) -> str:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("model.py")
        info.size = len(MODEL)
        tar.addfile(info, io.BytesIO(MODEL))
        add(tar)
    return base64.b64encode(buf.getvalue()).decode()


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", data: bytes = b"x") -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = linkname
        if kind == tarfile.REGTYPE:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        else:
            tar.addfile(info)
    return add


def _both(*adds: Callable[[tarfile.TarFile], None]) -> Callable[[tarfile.TarFile], None]:
    return lambda tar: [a(tar) for a in adds] and None


HOSTILE: Dict[str, Callable[[tarfile.TarFile], None]] = {
    "absolute path": _member("/tmp/evil.py"),
    "dot-dot path": _member("../evil.py"),
    "nested dot-dot": _member("pkg/../../evil.py"),
    "absolute symlink": _member("link", tarfile.SYMTYPE, "/etc/passwd"),
    "relative symlink out": _member("sub/link", tarfile.SYMTYPE, "../../outside"),
    "symlink chain out": _both(_member("here", tarfile.SYMTYPE, "."), _member("up", tarfile.SYMTYPE, "here/..")),
    "file through a symlink": _both(_member("dir", tarfile.SYMTYPE, "."), _member("dir/evil.py")),
    "hard link out": _member("hard", tarfile.LNKTYPE, "/etc/passwd"),
    "hard link dot-dot": _member("hard", tarfile.LNKTYPE, "../x"),
    "character device": _member("dev", tarfile.CHRTYPE),
    "block device": _member("blk", tarfile.BLKTYPE),
    "fifo": _member("pipe", tarfile.FIFOTYPE),
}


@pytest.fixture(scope="module")
def shared_master(tmp_path_factory: pytest.TempPathFactory) -> InProcessMaster:
    """One master for the hostile archives: each must leave it without experiments."""
    return InProcessMaster(tmp_path_factory.mktemp("hostile") / "data")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_master_refuses_hostile_archives_and_stores_nothing(shared_master: InProcessMaster, kind: str) -> None:
    session = shared_master.session()
    archive = _archive(HOSTILE[kind])
    with pytest.raises(errors.APIError) as info:
        session.post("/experiments", {"config": config(), "model_definition": archive})
    assert info.value.status_code == 400
    assert "unsafe archive member" in str(info.value)
    name = str(info.value).split("unsafe archive member ", 1)[1].split(":", 1)[0]
    assert name.strip("'") in {"/tmp/evil.py", "../evil.py", "pkg/../../evil.py", "link", "sub/link", "up",
                               "dir/evil.py", "hard", "dev", "blk", "pipe"}
    assert session.get("/experiments")["experiments"] == []


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_trial_side_refuses_hostile_archives(tmp_path: pathlib.Path, kind: str) -> None:
    dst = tmp_path / "model"
    dst.mkdir()
    with pytest.raises(errors.DeterminedError, match="unsafe|refusing|not a regular|points"):
        extract_model_def(_archive(HOSTILE[kind]), str(dst))
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "outside").exists()


def test_safe_links_are_accepted_on_both_sides(master: InProcessMaster, tmp_path: pathlib.Path) -> None:
    archive = _archive(_both(_member("data/a.txt", data=b"hello"), _member("alias.txt", tarfile.SYMTYPE, "data/a.txt"),
                             _member("same.txt", tarfile.LNKTYPE, "data/a.txt")))
    exp = master.session().post("/experiments", {"config": config(), "model_definition": archive})["experiment"]
    assert exp["id"] == 1
    dst = tmp_path / "model"
    dst.mkdir()
    extract_model_def(archive, str(dst))
    assert (dst / "alias.txt").read_text() == "hello" and (dst / "same.txt").read_text() == "hello"


def test_archives_that_unpack_past_the_limit_are_refused(master: InProcessMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    from determined.master.lifecycle import model_def

    monkeypatch.setattr(model_def, "MAX_MODEL_DEF_BYTES", 1000)
    archive = _archive(_member("zeros.bin", data=bytes(5000)))  # compresses to far less than 1000 bytes
    assert len(base64.b64decode(archive)) < 1000
    with pytest.raises(errors.APIError, match="unpacks to more than"):
        master.session().post("/experiments", {"config": config(), "model_definition": archive})


def test_packer_limit_names_the_largest_files_and_honours_detignore(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "model"
    (model / "data").mkdir(parents=True)
    (model / "model.py").write_bytes(MODEL)
    (model / "data" / "big.bin").write_bytes(os.urandom(3000))
    (model / "weights.ckpt").write_bytes(os.urandom(2000))
    with pytest.raises(context.ContextError) as info:
        context.pack_model_dir(str(model), limit=4000)
    message = str(info.value)
    assert "data/big.bin" in message and "weights.ckpt" in message and ".detignore" in message
    (model / ".detignore").write_text("# outputs\ndata/\n*.ckpt\n")
    names = _names(context.pack_model_dir(str(model), limit=4000))
    assert names == ["model.py"]


def test_packer_refuses_links_out_of_the_model_dir(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.py").write_bytes(MODEL)
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", model / "abs-link")
    os.symlink("../secret.txt", model / "rel-link")
    with pytest.raises(context.ContextError) as info:
        context.pack_model_dir(str(model))
    assert "abs-link" in str(info.value) and "rel-link" in str(info.value) and ".detignore" in str(info.value)
    (model / ".detignore").write_text("*-link\n")
    os.symlink("model.py", model / "inside")
    assert _names(context.pack_model_dir(str(model))) == ["inside", "model.py"]


def _names(data: bytes) -> list:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return sorted(m.name for m in tar.getmembers())
