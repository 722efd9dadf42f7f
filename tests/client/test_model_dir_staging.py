"""The one staging of a model dir (experimental/client/_submit.py), as the SDK, the CLI and the search runner use it."""
import os
import pathlib
import tarfile
import io
import base64

import pytest

from determined.common.context import ContextError, pack_model_dir_b64
from determined.experimental.client._common import UsageError
from determined.experimental.client._submit import staged_model_dir


def _members(directory: str) -> dict:
    data = base64.b64decode(pack_model_dir_b64(directory))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_the_model_dir_is_used_as_it_is_when_nothing_is_added(tmp_path: pathlib.Path) -> None:
    (tmp_path / "model.py").write_text("x = 1")
    with staged_model_dir(tmp_path) as staged:
        assert staged == str(tmp_path)


def test_a_link_inside_the_directory_travels_by_its_content_and_includes_join_at_the_top(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.py").write_text("x = 1")
    (model / ".detignore").write_text("big.bin\n")
    (model / "big.bin").write_text("ignored")
    os.symlink(model / "model.py", model / "alias.py")
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2")
    with staged_model_dir(model, [data]) as staged:
        files = _members(staged)
    assert not pathlib.Path(staged).exists()  # the temporary copy is gone after the block
    assert files["alias.py"] == "x = 1" and files["data/rows.csv"] == "1,2" and "big.bin" not in files


def test_a_link_that_leads_out_of_the_directory_is_refused_by_name(tmp_path: pathlib.Path) -> None:
    """The context can be read by every user of the master: a link to a file elsewhere must not upload it."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.py").write_text("x = 1")
    (tmp_path / "credentials").write_text("secret")
    os.symlink(tmp_path / "credentials", model / "creds")
    with pytest.raises(ContextError, match="'creds': a symbolic link to .*outside the model directory.*includes"):
        with staged_model_dir(model):
            pass


def test_an_include_that_is_missing_or_clashes_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / "model.py").write_text("x = 1")
    with pytest.raises(UsageError, match="does not exist"):
        with staged_model_dir(tmp_path, [tmp_path / "nope"]):
            pass
    with pytest.raises(UsageError, match="already in the model directory"):
        with staged_model_dir(tmp_path, [tmp_path / "model.py"]):
            pass
