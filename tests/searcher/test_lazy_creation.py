"""On the platform, search methods create trials as room allows (SearchContext.window), not all at once: the same
trials come out, in the same order, and never more than the window of them wait to report at once."""
from typing import Any, Dict, Optional

import pytest

from determined import searcher
from determined.searcher import SearchContext, make_search_method, simulate
from determined.searcher._context import MIN_WINDOW

HPARAMS = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}, "global_batch_size": {"type": "const", "val": 4}}
GRID = {"x": {"type": "double", "minval": 0.0, "maxval": 1.0, "count": 20}, "global_batch_size": 4}
LENGTH = {"batches": 64}

SEARCHES = {
    "random": ({"name": "random", "max_trials": 30, "max_length": LENGTH}, HPARAMS),
    "grid": ({"name": "grid", "max_length": LENGTH}, GRID),
    "adaptive_asha": ({"name": "adaptive_asha", "max_trials": 40, "max_length": LENGTH}, HPARAMS),
    "adaptive": ({"name": "adaptive", "budget": {"batches": 64 * 24}, "max_length": LENGTH}, HPARAMS),
    "adaptive_simple": ({"name": "adaptive_simple", "max_trials": 40, "max_length": LENGTH}, HPARAMS),
    "pbt": ({"name": "pbt", "population_size": 24, "num_rounds": 2, "length_per_round": {"batches": 8},
             "replace_function": {"truncate_fraction": 0.25},
             "explore_function": {"resample_probability": 0.2, "perturb_factor": 0.2}}, HPARAMS),
}


def objective(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
    return (float(hparams["x"]) - 0.3) ** 2 + 1.0 / length


def canonical(search: Dict[str, Any]) -> Dict[str, Any]:
    from determined.config.searchers import SearcherSpec
    from determined.config.errors import Problems

    problems = Problems()
    out = SearcherSpec().check({"metric": "loss", **search}, "searcher", problems)
    problems.raise_if_any("bad test config")
    return dict(out)


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_the_same_trials_in_the_same_order_and_never_more_than_the_window_waiting(name: str) -> None:
    search, hparams = SEARCHES[name]
    config = canonical(search)
    eager = simulate(make_search_method(config), hparams, objective, seed=5)
    waiting = {"now": 0, "most": 0}
    reported: set = set()

    def watch(kind: str, args: Dict[str, Any]) -> None:
        rid = args.get("request_id")
        if kind == "trial_created":
            waiting["now"] += 1
        elif kind in ("validation_completed", "trial_closed", "trial_exited_early") and rid not in reported:
            reported.add(rid)
            waiting["now"] -= 1
        waiting["most"] = max(waiting["most"], waiting["now"])

    lazy = simulate(make_search_method(config), hparams, objective, seed=5, capacity=2, snapshot_every_event=True,
                    on_event=watch)
    assert lazy.shutdown and not lazy.failure
    assert [t.hparams for t in lazy.trials.values()] == [t.hparams for t in eager.trials.values()]
    assert len(lazy.trials) > MIN_WINDOW
    assert waiting["most"] <= MIN_WINDOW, f"{waiting['most']} trials were created and waiting to report at once"


def test_the_window_follows_capacity_and_max_concurrent_trials() -> None:
    assert SearchContext(0, {}).window() is None, "a simulation on its own: no limit"
    assert SearchContext(0, {}, capacity=2).window() == MIN_WINDOW
    assert SearchContext(0, {}, capacity=100).window() == 100
    assert SearchContext(0, {}, capacity=100).window(max_concurrent_trials=3) == 3


def test_a_random_search_of_a_million_trials_starts_with_the_window() -> None:
    method = make_search_method(canonical({"name": "random", "max_trials": 1_000_000, "max_length": LENGTH}))
    ops = method.initial_operations(SearchContext(1, HPARAMS, capacity=4))
    assert sum(isinstance(op, searcher.Create) for op in ops) == MIN_WINDOW
    assert len(str(method.snapshot())) < 5000, "the state holds the unfinished trials, not the million"


def test_a_snapshot_of_the_eager_random_search_restores() -> None:
    """A database written before lazy creation holds snapshots with every request id: they restore."""
    method = make_search_method(canonical({"name": "random", "max_trials": 3, "max_length": LENGTH}))
    method.restore({"request_ids": ["a", "b", "c"], "validated": {"a": 64}, "exited": [], "closed": ["a"]})
    assert method.open == ["b", "c"] and method.created == 3 and method.closed == 1
    assert method.progress() == pytest.approx(1 / 3)
    ctx = SearchContext(0, HPARAMS, capacity=1)
    assert method.on_trial_closed(ctx, "b") == []
    assert method.on_trial_closed(ctx, "c") == [searcher.Shutdown()]


def test_too_many_trials_are_refused_with_the_limit_and_why() -> None:
    for search in ({"name": "random", "max_trials": 10**9, "max_length": LENGTH},
                   {"name": "adaptive", "budget": {"batches": 10**12}, "max_length": LENGTH}):
        with pytest.raises(ValueError, match=r"more than the 10000 one experiment may have \(each trial is a database"):
            searcher.check_trial_count({"searcher": canonical(search), "hyperparameters": HPARAMS})
    searcher.check_trial_count({"searcher": canonical({"name": "random", "max_trials": 10_000, "max_length": LENGTH}),
                                "hyperparameters": HPARAMS})
