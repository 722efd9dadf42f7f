import pathlib
import sys

import pytest

pytest.importorskip("tensorflow_estimator")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
