import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


@pytest.fixture
def ckpt_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "checkpoints"
