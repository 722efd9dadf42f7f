"""Progress moves with the work trials do, for every search method, not only when they report."""
from typing import Any, Dict, List, Optional

import pytest

from determined import config as det_config
from determined import searcher
from determined.searcher import Create, SearchContext, ValidateAfter, simulate

HPARAMS = {"global_batch_size": {"type": "const", "val": 8}, "x": {"type": "double", "minval": 0.0, "maxval": 1.0},
           "c": {"type": "categorical", "vals": [1, 2]}}
PBT = {"name": "pbt", "population_size": 4, "num_rounds": 3, "length_per_round": {"batches": 10},
       "replace_function": {"truncate_fraction": 0.25}, "explore_function": {"resample_probability": 0.2,
                                                                            "perturb_factor": 0.2}}
METHODS = {
    "single": {"name": "single", "max_length": {"batches": 40}},
    "random": {"name": "random", "max_length": {"batches": 40}, "max_trials": 3},
    "grid": {"name": "grid", "max_length": {"batches": 40}},
    "adaptive_asha": {"name": "adaptive_asha", "max_length": {"batches": 64}, "max_trials": 8, "divisor": 2},
    "async_halving": {"name": "async_halving", "max_length": {"batches": 64}, "max_trials": 8, "num_rungs": 3,
                      "divisor": 2},
    "adaptive": {"name": "adaptive", "max_length": {"batches": 64}, "budget": {"batches": 400}, "divisor": 2},
    "adaptive_simple": {"name": "adaptive_simple", "max_length": {"batches": 64}, "max_trials": 6, "divisor": 2},
    "pbt": PBT,
}


def method_for(fields: Dict[str, Any]) -> searcher.EngineSearchMethod:
    hparams = dict(HPARAMS)
    if fields["name"] == "grid":
        hparams["x"] = {**HPARAMS["x"], "count": 2}
    raw = {"entrypoint": "m:T", "hyperparameters": hparams, "searcher": {"metric": "loss", **fields}}
    return searcher.make_search_method(det_config.load_experiment_config(raw)["searcher"])


@pytest.mark.parametrize("name", sorted(METHODS))
def test_progress_moves_while_trials_train_and_never_goes_back(name: str) -> None:
    method = method_for(METHODS[name])
    hparams = dict(HPARAMS, x={**HPARAMS["x"], "count": 2})
    trained: Dict[str, float] = {}
    seen: List[float] = []
    moved_mid_operation = []

    def on_event(kind: str, args: Dict[str, Any]) -> None:
        if kind != "validation_completed":
            seen.append(method.progress(trained))
            return
        rid, length = args["request_id"], args["length"]
        before = method.progress(trained)
        # a new trial starts at 0; a PBT clone at its parent's length, one round (10 batches) before its target
        start = trained.get(rid, length - 10.0 if name == "pbt" else 0.0)
        trained[rid] = (start + length) / 2  # half way to the length it was asked for
        halfway = method.progress(trained)
        trained[rid] = float(length)
        done = method.progress(trained)
        assert before <= halfway <= done < 1.0
        moved_mid_operation.append(halfway > before)
        seen.append(done)

    def on_create_trained(request_id: str, hparams_: Dict[str, Any], length: int, parent: Optional[str]) -> float:
        return hparams_["x"] + 1.0 / length

    simulate(method, hparams, on_create_trained, seed=1, on_event=on_event)
    assert seen == sorted(seen), "progress went back"
    assert all(moved_mid_operation), "progress stood still while a trial trained"
    assert method.progress(trained) == 1.0


def test_single_trial_at_6200_of_8000_batches_is_77_percent() -> None:
    """The report that started this: a single search stayed at 0 % until its trial ended."""
    method = method_for({"name": "single", "max_length": {"batches": 8000}})
    (create, validate, _close) = method.initial_operations(SearchContext(0, HPARAMS))
    assert isinstance(create, Create) and isinstance(validate, ValidateAfter)
    assert method.progress() == 0.0
    assert method.progress({create.request_id: 6200}) == pytest.approx(0.775)
    assert method.progress({create.request_id: 9000}) == 0.99  # below 1 until it reported: it may still validate


def test_asha_stays_below_one_until_it_shuts_down() -> None:
    method = method_for(METHODS["adaptive_asha"])
    ops = method.initial_operations(SearchContext(0, HPARAMS))
    everyone_far = {op.request_id: 10_000.0 for op in ops if isinstance(op, Create)}
    assert method.progress(everyone_far) < 1.0
    wrapped = searcher.Searcher(method, SearchContext(0, HPARAMS))
    assert 0.0 < wrapped.progress(everyone_far) < 1.0 and wrapped.progress() < wrapped.progress(everyone_far)
