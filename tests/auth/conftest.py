import pathlib

import pytest

from determined.master.security import users

from ._helpers import InProcessMaster


@pytest.fixture(autouse=True)
def cheap_password_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashes made in these tests use a small scrypt cost (the cost is stored in each hash, checks follow it)."""
    monkeypatch.setattr(users, "_SCRYPT_N", 2**10)


@pytest.fixture
def master(tmp_path: pathlib.Path) -> InProcessMaster:
    return InProcessMaster(tmp_path / "data")
