import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def det_data_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Every test gets its own data dir and no configured master."""
    path = tmp_path / "det-data"
    monkeypatch.setenv("DET_DATA_DIR", str(path))
    for var in ("DET_MASTER", "DET_MASTER_ADDR", "DET_TRIAL_ID", "DET_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return path
