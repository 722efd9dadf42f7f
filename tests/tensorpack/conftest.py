import pytest

pytest.importorskip("tensorpack")
