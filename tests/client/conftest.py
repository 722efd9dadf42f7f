"""The client tests run against one really trained experiment, with an embedded master and with a server."""
import dataclasses
import pathlib
from typing import Iterator, Optional

import pytest

from determined.master import embedded
from tests.client import _trained


@dataclasses.dataclass
class Env:
    trained: _trained.Trained
    mode: str
    url: Optional[str]


@pytest.fixture(scope="module", params=["embedded", "server"])
def master_mode(request: pytest.FixtureRequest) -> Iterator[Env]:
    trained = _trained.shared()
    if request.param == "embedded":
        yield Env(trained, "embedded", None)
        return
    master = embedded.start(trained.data_dir)
    try:
        yield Env(trained, "server", master.url)
    finally:
        master.stop()


@pytest.fixture
def env(master_mode: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Env:
    """The shared experiment's data dir, DET_MASTER set to the server in server mode, cwd a fresh directory."""
    monkeypatch.setenv("DET_DATA_DIR", str(master_mode.trained.data_dir))
    if master_mode.url:
        monkeypatch.setenv("DET_MASTER", master_mode.url)
    monkeypatch.chdir(tmp_path)
    return master_mode
