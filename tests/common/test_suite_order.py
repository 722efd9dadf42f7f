"""The order `make test` hands work to its xdist workers (tests/conftest.py): the longest units first, the UI tests
as one unit (their session-scoped master and browser started once), the rest most tests first."""
import pathlib
from typing import Any, List

from tests import conftest

REPO = pathlib.Path(__file__).resolve().parents[2]


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_every_longest_first_unit_exists_and_is_named_once() -> None:
    assert len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST)
    for unit in conftest.LONGEST_FIRST:
        assert (REPO / unit).exists(), f"{unit} is in LONGEST_FIRST (tests/conftest.py) but not in the repository"
        assert unit.endswith(".py") or unit in conftest.ONE_WORKER, unit


def test_long_units_first_the_ui_modules_one_unit_then_most_tests_first() -> None:
    first, second = conftest.LONGEST_FIRST[:2]
    nodeids = ["tests/a/test_small.py::t1",
               "tests/a/test_many.py::t1", "tests/a/test_many.py::t2", "tests/a/test_many.py::t3",
               "tests/ui/test_zz.py::t1", f"{second}test_aa.py::t1" if second.endswith("/") else f"{second}::t1",
               f"{first}::t2", f"{first}::t1", "tests/a/test_small.py::t2"]
    items: List[Any] = [_Item(n) for n in nodeids]
    conftest.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    order = [i.nodeid for i in items]
    assert order[:2] == [f"{first}::t2", f"{first}::t1"]  # a module's own order is kept
    assert conftest._unit("tests/ui/test_zz.py::t1") == conftest._unit("tests/ui/test_browser.py::t") == "tests/ui/"
    assert conftest._unit("tests/a/test_many.py::t1") == "tests/a/test_many.py"
    assert order[-5:] == ["tests/a/test_many.py::t1", "tests/a/test_many.py::t2", "tests/a/test_many.py::t3",
                          "tests/a/test_small.py::t1", "tests/a/test_small.py::t2"]
