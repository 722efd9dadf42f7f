import json
from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from determined import searcher
from determined.searcher import Close, Create, ExitedReason, Searcher, Shutdown, ValidateAfter

HPARAMS = {
    "global_batch_size": {"type": "const", "val": 8},
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def config(name: str = "random", **extra: Any) -> Dict[str, Any]:
    search = {"name": name, "metric": "loss", "max_length": {"batches": 100}, **extra}
    if name == "random":
        search.setdefault("max_trials", 4)
    return {"searcher": search, "hyperparameters": HPARAMS}


def test_random_creates_max_trials_up_front_each_validated_once_then_closed() -> None:
    s = Searcher.from_config(config(max_trials=3), seed=7)
    ops = s.initial_operations()
    assert [type(op) for op in ops] == [Create, ValidateAfter, Close] * 3
    ids = [op.request_id for op in ops if isinstance(op, Create)]
    assert len(set(ids)) == 3
    for op in ops:
        if isinstance(op, ValidateAfter):
            assert op.length == 100
        if isinstance(op, Create):
            assert op.checkpoint is None
            assert 1e-4 <= op.hparams["lr"] <= 1e-1 and op.hparams["act"] in ("relu", "tanh")
            assert op.hparams["global_batch_size"] == 8


def test_same_seed_same_hparams_and_other_seed_differs() -> None:
    a = Searcher.from_config(config(max_trials=5), seed=11).initial_operations()
    b = Searcher.from_config(config(max_trials=5), seed=11).initial_operations()
    c = Searcher.from_config(config(max_trials=5), seed=12).initial_operations()
    assert a == b
    assert [op.hparams for op in a if isinstance(op, Create)] != [op.hparams for op in c if isinstance(op, Create)]


def test_progress_and_shutdown_after_every_trial_closed() -> None:
    s = Searcher.from_config(config(max_trials=2), seed=1)
    ids = [op.request_id for op in s.initial_operations() if isinstance(op, Create)]
    assert s.progress() == 0.0
    assert s.validation_completed(ids[0], 0.5, 100) == []
    assert s.progress() == pytest.approx(0.5)
    assert s.trial_closed(ids[0]) == []
    assert s.trial_exited_early(ids[1], ExitedReason.ERRORED) == []
    assert s.progress() == pytest.approx(1.0)
    assert s.trial_closed(ids[1]) == [Shutdown(failure=False)]


def test_single_is_one_trial() -> None:
    s = Searcher.from_config(config("single"), seed=3)
    ops = s.initial_operations()
    assert [type(op) for op in ops] == [Create, ValidateAfter, Close]
    assert s.unit == "batches"


def test_unit_follows_max_length() -> None:
    s = Searcher.from_config({"searcher": {"name": "single", "metric": "m", "max_length": {"epochs": 3}},
                              "hyperparameters": HPARAMS}, seed=0)
    assert s.unit == "epochs"
    ops = s.initial_operations()
    assert ops[1] == ValidateAfter(ops[0].request_id, 3)


def test_bad_searcher_sections_have_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown search method 'bogus'"):
        searcher.make_search_method({"name": "bogus"})
    with pytest.raises(ValueError, match="searcher.max_length"):
        searcher.make_search_method({"name": "single", "max_length": 10})
    with pytest.raises(ValueError, match="searcher.max_trials"):
        searcher.make_search_method({"name": "random", "max_length": {"batches": 10}})


def test_operations_round_trip_through_json() -> None:
    ops = [Create("r", {"a": 1}, {"request_id": "p"}), ValidateAfter("r", 5), Close("r"), Shutdown(True)]
    assert [searcher.operation_from_dict(json.loads(json.dumps(searcher.operation_to_dict(op)))) for op in ops] == ops


def _drive(s: Searcher, events: List[Any]) -> List[Any]:
    out = []
    for kind, *args in events:
        out.append(getattr(s, kind)(*args))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), trials=st.integers(1, 6), cut=st.integers(0, 12))
def test_snapshot_restore_gives_the_same_continuation(seed: int, trials: int, cut: int) -> None:
    original = Searcher.from_config(config(max_trials=trials), seed=seed)
    ids = [op.request_id for op in original.initial_operations() if isinstance(op, Create)]
    events = []
    for i, rid in enumerate(ids):
        events += [("validation_completed", rid, 0.1 * i, 100), ("trial_closed", rid)]
    cut = min(cut, len(events))
    _drive(original, events[:cut])
    snap = json.loads(json.dumps(original.snapshot()))  # snapshots are plain JSON
    restored = Searcher.from_config(config(max_trials=trials), seed=seed + 1)
    restored.restore(snap)
    assert _drive(restored, events[cut:]) == _drive(original, events[cut:])
    assert restored.progress() == original.progress() == 1.0
    # the rng continues identically too
    assert restored.context.sample_hparams() == original.context.sample_hparams()
    assert restored.context.new_request_id() == original.context.new_request_id()


class _PromoteOnce(searcher.EngineSearchMethod):
    """A tiny ASHA-like method: proves the interface expresses promotions, closes and clones from checkpoints."""

    def __init__(self) -> None:
        self.best = None

    def initial_operations(self, ctx: searcher.SearchContext) -> List[searcher.Operation]:
        a, b = ctx.new_request_id(), ctx.new_request_id()
        return [Create(a, ctx.sample_hparams()), ValidateAfter(a, 10), Create(b, ctx.sample_hparams()), ValidateAfter(b, 10)]

    def on_validation_completed(self, ctx, request_id, metric, length):  # type: ignore[no-untyped-def]
        if length == 10 and self.best is None:
            self.best = request_id
            child = ctx.new_request_id()
            return [ValidateAfter(request_id, 40), Create(child, ctx.sample_hparams(), checkpoint={"request_id": request_id})]
        return [Close(request_id)]

    def progress(self) -> float:
        return 0.0

    def snapshot(self) -> Dict[str, Any]:
        return {"best": self.best}

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.best = snapshot["best"]


def test_interface_fits_promotions_and_clones() -> None:
    s = Searcher(_PromoteOnce(), searcher.SearchContext(5, HPARAMS))
    first = s.initial_operations()
    a = first[0].request_id
    ops = s.validation_completed(a, 0.3, 10)
    assert ops[0] == ValidateAfter(a, 40)
    assert isinstance(ops[1], Create) and ops[1].checkpoint == {"request_id": a}
    assert s.validation_completed(first[2].request_id, 0.9, 10) == [Close(first[2].request_id)]
