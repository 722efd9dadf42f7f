"""NumPy's removed builtin-type aliases (np.int, np.float, np.bool, ...) for Trial code of Determined 0.12-0.26."""
import pathlib
import sys
import types

import numpy as np
import pytest

from determined import _execution, _numpy_compat


TRIAL_MODULE = '''
import numpy as np
from determined import Trial

LABEL_DTYPE = np.int  # at import time, as data.py files of that era did


class OldNumpyTrial(Trial):
    def binary_labels(self, digits):
        return (np.asarray(digits) >= 5).astype(np.int), np.zeros(len(digits), dtype=np.bool)
'''


def test_a_trial_module_using_removed_aliases_loads_and_runs(tmp_path: pathlib.Path) -> None:
    (tmp_path / "old_numpy_model.py").write_text(TRIAL_MODULE)
    try:
        trial_class = _execution.load_trial_class("old_numpy_model:OldNumpyTrial", str(tmp_path))
        labels, mask = trial_class.binary_labels(None, [1, 7, 5])
        assert labels.tolist() == [0, 1, 1] and labels.dtype == np.dtype(int)
        assert mask.dtype == np.bool_ and not mask.any()
        assert sys.modules["old_numpy_model"].LABEL_DTYPE is int
    finally:
        sys.modules.pop("old_numpy_model", None)
    assert np.float is float and np.object is object and np.str is str  # type: ignore[attr-defined]


def test_names_numpy_defines_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("numpy")
    fake.long = "numpy 2's int64"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy", fake)
    monkeypatch.setattr(_numpy_compat, "_installed", False)
    _numpy_compat.install()
    assert fake.long == "numpy 2's int64"  # type: ignore[attr-defined]
    assert fake.int is int and fake.bool is bool  # type: ignore[attr-defined]
    fake.int = "changed"  # type: ignore[attr-defined]
    _numpy_compat.install()  # idempotent: a second call changes nothing
    assert fake.int == "changed"  # type: ignore[attr-defined]


def _numpy2_sum(a, *args, **kwargs):
    """np.sum as NumPy 2.4 answers a generator (the test environment's NumPy 1.26 still sums it)."""
    if isinstance(a, types.GeneratorType):
        raise TypeError("Calling np.sum(generator) is deprecated.")
    return np.sum(a, *args, **kwargs)


def test_np_sum_of_a_generator_is_python_sum_as_in_numpy_1() -> None:
    """DARTS code of 0.13: `np.sum(np.prod(v.size()) for v in model.parameters())` to count parameters."""
    fake_np = types.SimpleNamespace(sum=_numpy2_sum)
    assert not _numpy_compat._sums_generators(fake_np)
    shimmed = _numpy_compat._sum_accepting_generators(_numpy2_sum)
    with pytest.warns(DeprecationWarning, match="np.sum\\(generator\\)"):
        assert shimmed(np.prod(s) for s in [(2, 3), (4,)]) == 10
    out = np.zeros(())
    with pytest.warns(DeprecationWarning):
        assert shimmed((x for x in [1.5, 2.5]), out=out) is out
    assert float(out) == 4.0
    # every other call is NumPy's own
    assert shimmed(np.arange(6).reshape(2, 3), axis=0).tolist() == [3, 5, 7]
    # a NumPy that still sums generators is left alone
    _numpy_compat.install()
    assert _numpy_compat._sums_generators(np) and not getattr(np.sum, "_det_sums_generators", False)
