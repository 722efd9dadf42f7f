"""The requests a trial's run does not make: an answer the master already gave carries the next one.

The run's context (asked with `with_operation`) carries its first searcher operation and the preemption signal;
a completed operation's answer carries the next operation and the signal again. The searcher uses a definite
answer (an operation, or no more operations) instead of asking; a `wait` it asks again, as before.
"""
from typing import Any, Dict, List, Optional, Tuple

import pytest

from determined.core._distributed import DistributedContext
from determined.core._preempt import PreemptContext
from determined.core._searcher import SearcherContext

CONFIG = {"searcher": {"name": "random", "metric": "loss", "max_length": {"batches": 5}, "max_trials": 1}}


class _Master:
    """Answers a trial's requests from a script of answers, and notes every request."""

    def __init__(self, completion: Dict[str, Any], operations: Optional[List[Dict[str, Any]]] = None) -> None:
        self.requests: List[Tuple[str, str]] = []
        self.completion = completion
        self.operations = list(operations or [])

    def get(self, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        self.requests.append(("GET", path))
        if path.endswith("/signals/preemption"):
            return {"preempt": False}
        if path.endswith("/searcher/operation"):
            return self.operations.pop(0) if self.operations else {"completed": True}
        raise AssertionError(f"unexpected GET {path}")

    def post(self, path: str, json: Any = None) -> Any:
        self.requests.append(("POST", path))
        if path.endswith("/searcher/completed_operation"):
            return self.completion
        return {}


def _searcher(master: _Master, first: Optional[Dict[str, Any]], preempt_answer: Optional[bool]
              ) -> Tuple[SearcherContext, PreemptContext]:
    distributed = DistributedContext()
    preempt = PreemptContext(master, "alloc-1", distributed)  # type: ignore[arg-type]
    if preempt_answer is not None:
        preempt._answered(preempt_answer)  # what core.init does with the context's `preempt`
    searcher = SearcherContext(master, 7, distributed, preempt, config=CONFIG, hparams={"global_batch_size": 1},  # type: ignore[arg-type]
                               next_answer=first)
    return searcher, preempt


def test_a_run_that_got_its_answers_in_advance_asks_nothing() -> None:
    master = _Master(completion={"next_operation": {"completed": True}, "preempt": False})
    searcher, _ = _searcher(master, {"length": 5, "searcher_length": 5}, preempt_answer=False)
    lengths = []
    for op in searcher.operations():
        lengths.append(op.length)
        op.report_completed(0.5)
    assert lengths == [5]
    assert master.requests == [("POST", "/trials/7/searcher/completed_operation")]


def test_without_answers_in_advance_the_run_asks_as_before() -> None:
    master = _Master(completion={}, operations=[{"length": 5, "searcher_length": 5}])
    searcher, _ = _searcher(master, None, preempt_answer=None)
    for op in searcher.operations():
        op.report_completed(0.5)
    asked = [path for method, path in master.requests if method == "GET"]
    assert asked == ["/allocations/alloc-1/signals/preemption", "/trials/7/searcher/operation",
                     "/trials/7/searcher/operation"]


def test_a_wait_in_advance_is_asked_again() -> None:
    master = _Master(completion={"next_operation": {"wait": True}, "preempt": False},
                     operations=[{"length": 10, "searcher_length": 10}, {"completed": True}])
    searcher, _ = _searcher(master, {"wait": True}, preempt_answer=False)
    searcher._wait_poll_s = 0.0
    lengths = []
    for op in searcher.operations():
        lengths.append(op.length)
        op.report_completed(0.5)
    assert lengths == [10]
    assert [p for m, p in master.requests if m == "GET"] == ["/trials/7/searcher/operation"] * 2


@pytest.mark.parametrize("where", ["context", "completion"])
def test_a_preemption_signal_in_an_answer_stops_the_run(where: str) -> None:
    master = _Master(completion={"next_operation": {"length": 10, "searcher_length": 10},
                                 "preempt": where == "completion"})
    searcher, preempt = _searcher(master, {"length": 5, "searcher_length": 5}, preempt_answer=where == "context")
    lengths = [op.length for op in _complete_each(searcher.operations())]
    assert lengths == ([] if where == "context" else [5])
    assert preempt.should_preempt()
    assert not [p for m, p in master.requests if m == "GET"]  # the answers said it: no poll


def _complete_each(ops: Any) -> Any:
    for op in ops:
        yield op
        op.report_completed(0.5)
