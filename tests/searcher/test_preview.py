import json
from typing import Any, Dict

import pytest

from determined import config as det_config
from determined.searcher import format_preview, preview

HPARAMS = {
    "global_batch_size": 32,
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -2, "count": 3},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def canonical(searcher_config: Dict[str, Any]) -> Dict[str, Any]:
    return det_config.load_experiment_config({"entrypoint": "m:T", "records_per_epoch": 1000, "hyperparameters": HPARAMS,
                                              "searcher": {"metric": "loss", **searcher_config}})


def check_json(data: Dict[str, Any]) -> None:
    assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_asha_worked_example_epochs() -> None:
    data = preview(canonical({"name": "adaptive_asha", "max_length": {"epochs": 32}, "max_trials": 16}))
    check_json(data)
    assert data["searcher"] == "adaptive_asha" and data["unit"] == "epochs" and data["max_rungs"] == 3
    assert data["brackets"] == [
        {"rungs": 3, "trials": 12, "concurrency": 4, "rung_lengths": [2, 8, 32]},
        {"rungs": 2, "trials": 4, "concurrency": 4, "rung_lengths": [8, 32]},
    ]
    assert data["trials"] == 16
    # equal metrics: 12 trials x 2, 3 x 6 more, 0 reach 32 in bracket 1; 4 x 8, 1 x 24 more in bracket 2
    assert data["total_length"] == 12 * 2 + 3 * 6 + 0 + 4 * 8 + 1 * 24
    assert data["total_length_worst"] >= data["total_length"]
    text = format_preview(data)
    assert "adaptive_asha" in text and "lengths in epochs" in text
    assert "2, 8, 32" in text and "rung lengths (epochs)" in text


def test_asha_worked_example_batches_and_aggressive() -> None:
    data = preview(canonical({"name": "adaptive_asha", "max_length": {"batches": 6400}, "max_trials": 512}))
    assert [(b["rungs"], b["trials"]) for b in data["brackets"]] == [(5, 363), (4, 112), (3, 37)]
    assert data["brackets"][0]["rung_lengths"] == [25, 100, 400, 1600, 6400]
    aggressive = preview(canonical({"name": "adaptive_asha", "max_length": {"batches": 6400}, "max_trials": 512,
                                    "mode": "aggressive"}))
    assert aggressive["brackets"] == [{"rungs": 5, "trials": 512, "concurrency": 512,
                                       "rung_lengths": [25, 100, 400, 1600, 6400]}]


def test_async_halving_grid_random_single() -> None:
    halving = preview(canonical({"name": "async_halving", "num_rungs": 3, "max_length": {"batches": 100},
                                 "max_trials": 9, "divisor": 3}))
    assert halving["brackets"] == [{"rungs": 3, "trials": 9, "concurrency": 9, "rung_lengths": [11, 33, 100]}]
    assert halving["total_length"] == 9 * 11 + 3 * 22 + 1 * 67
    grid = preview(canonical({"name": "grid", "max_length": {"records": 640}}))
    check_json(grid)
    assert grid["trials"] == 6 and grid["total_length"] == 6 * 640 and grid["unit"] == "records"
    assert grid["values"]["act"] == ["relu", "tanh"] and len(grid["values"]["lr"]) == 3
    assert "act" in format_preview(grid) and "relu, tanh" in format_preview(grid)
    rnd = preview(canonical({"name": "random", "max_length": {"batches": 50}, "max_trials": 7}))
    assert (rnd["trials"], rnd["max_length"], rnd["total_length"]) == (7, 50, 350)
    single = preview(canonical({"name": "single", "max_length": {"batches": 50}}))
    assert (single["trials"], single["total_length"]) == (1, 50)
    assert "Total training: 50 batches" in format_preview(single)
    assert "1 trial\n" in format_preview(single) + "\n" and "1 trials" not in format_preview(single)
    assert "7 trials" in format_preview(rnd)


def test_pbt_and_adaptive_family() -> None:
    pbt = preview(canonical({"name": "pbt", "population_size": 10, "num_rounds": 4, "length_per_round": {"batches": 20},
                             "replace_function": {"truncate_fraction": 0.3},
                             "explore_function": {"resample_probability": 0.2, "perturb_factor": 0.2}}))
    check_json(pbt)
    assert (pbt["population_size"], pbt["num_rounds"], pbt["length_per_round"]) == (10, 4, 20)
    assert pbt["total_length"] == 10 * 4 * 20 and pbt["trials"] == 10 + 3 * 3
    assert "population 10, 4 rounds of 20 batches" in format_preview(pbt)
    for cfg in ({"name": "adaptive", "max_length": {"batches": 100}, "budget": {"batches": 2000}},
                {"name": "adaptive_simple", "max_length": {"batches": 100}, "max_trials": 20},
                {"name": "sync_halving", "num_rungs": 2, "max_length": {"batches": 100}, "budget": {"batches": 600}}):
        data = preview(canonical(cfg))
        check_json(data)
        assert data["brackets"] and all(b["rung_lengths"][-1] == 100 for b in data["brackets"])
        assert data["total_length"] > 0 and data["trials"] >= len(data["brackets"])
        assert "rung lengths (batches)" in format_preview(data)


@pytest.mark.parametrize("smaller", [True, False])
def test_direction_is_shown(smaller: bool) -> None:
    data = preview(canonical({"name": "single", "max_length": {"batches": 5}, "smaller_is_better": smaller}))
    assert ("smaller is better" if smaller else "larger is better") in format_preview(data)
