import math
import random
from typing import Any, Dict, List

import pytest

from determined import Categorical, Constant, Double, Integer, Log
from determined.searcher._explore import explore

CONFIG: Dict[str, Any] = {
    "const": {"type": "const", "val": "adam"},
    "cat": {"type": "categorical", "vals": ["relu", "tanh", "gelu"]},
    "units": {"type": "int", "minval": 1, "maxval": 10},
    "dropout": {"type": "double", "minval": 0.1, "maxval": 1.0},
    "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1},
}
PARENT = {"const": "adam", "cat": "tanh", "units": 5, "dropout": 0.5, "lr": 0.01}


class Scripted(random.Random):
    """A Random whose random() answers a script: the draws explore makes, in order."""

    def __init__(self, draws: List[float]) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def random(self) -> float:
        return self.draws.pop(0)


def perturbed(name: str, value: Any, up: bool, factor: float) -> Any:
    """explore() on one numeric hyperparameter with resampling off and the direction forced."""
    rng = Scripted([0.99, 0.0 if up else 0.9])  # no resample; then < 0.5 is up
    out = explore({name: value}, {name: CONFIG[name]}, rng, resample_probability=0.5, perturb_factor=factor)
    assert rng.draws == []
    return out[name]


def test_int_goes_up_with_ceil_and_down_with_floor() -> None:
    assert perturbed("units", 5, up=True, factor=0.5) == 8  # 7.5 -> 8
    assert perturbed("units", 5, up=False, factor=0.5) == 2  # 2.5 -> 2
    assert perturbed("units", 3, up=True, factor=0.1) == 4  # 3.3 -> 4
    assert isinstance(perturbed("units", 5, up=True, factor=0.5), int)


def test_int_clamps_at_both_ends() -> None:
    assert perturbed("units", 9, up=True, factor=0.5) == 10  # 13.5 -> 14 -> maxval 10
    assert perturbed("units", 2, up=False, factor=0.9) == 1  # 0.2 -> 0 -> minval 1


def test_double_scales_and_clamps_at_both_ends() -> None:
    assert perturbed("dropout", 0.5, up=True, factor=0.2) == pytest.approx(0.6)
    assert perturbed("dropout", 0.5, up=False, factor=0.2) == pytest.approx(0.4)
    assert perturbed("dropout", 0.8, up=True, factor=0.5) == 1.0
    assert perturbed("dropout", 0.15, up=False, factor=0.5) == 0.1


def test_log_scales_the_value_and_clamps_to_base_powers() -> None:
    assert perturbed("lr", 0.01, up=True, factor=0.5) == pytest.approx(0.015)
    assert perturbed("lr", 0.01, up=False, factor=0.5) == pytest.approx(0.005)
    assert perturbed("lr", 0.08, up=True, factor=0.5) == pytest.approx(0.1)  # 0.12 > 10**-1
    assert perturbed("lr", 1.5e-4, up=False, factor=0.5) == pytest.approx(1e-4)  # 7.5e-5 < 10**-4


def test_perturb_factor_zero_keeps_every_value() -> None:
    rng = random.Random(3)
    for _ in range(50):
        assert explore(PARENT, CONFIG, rng, resample_probability=0.0, perturb_factor=0.0) == PARENT


def test_resample_probability_zero_never_resamples_and_perturbs_both_ways() -> None:
    rng = random.Random(5)
    ups = downs = 0
    for _ in range(400):
        out = explore(PARENT, CONFIG, rng, resample_probability=0.0, perturb_factor=0.2)
        assert out["const"] == "adam" and out["cat"] == "tanh"
        assert out["units"] in (6, 4)
        assert out["dropout"] in (pytest.approx(0.6), pytest.approx(0.4))
        assert out["lr"] in (pytest.approx(0.012), pytest.approx(0.008))
        if out["dropout"] > 0.5:
            ups += 1
        else:
            downs += 1
    assert 150 < ups < 250 and ups + downs == 400  # 50/50


def test_resample_probability_one_draws_from_the_configured_distributions() -> None:
    rng = random.Random(8)
    cats, doubles = set(), []
    for _ in range(300):
        out = explore(PARENT, CONFIG, rng, resample_probability=1.0, perturb_factor=0.2)
        assert out["const"] == "adam"
        assert out["cat"] in CONFIG["cat"]["vals"]
        assert 1 <= out["units"] <= 10 and isinstance(out["units"], int)
        assert 0.1 <= out["dropout"] <= 1.0
        assert 1e-4 <= out["lr"] <= 1e-1
        cats.add(out["cat"])
        doubles.append(out["dropout"])
    assert cats == {"relu", "tanh", "gelu"}  # categorical changes only by resampling
    assert len(set(doubles)) > 250  # fresh draws, not perturbations of 0.5
    assert min(doubles) < 0.2 and max(doubles) > 0.9


def test_resample_probability_in_between_resamples_about_that_often() -> None:
    rng = random.Random(13)
    changed = sum(
        explore(PARENT, {"cat": CONFIG["cat"]}, rng, resample_probability=0.3, perturb_factor=0.2)["cat"] != "tanh"
        for _ in range(3000)
    )
    assert 0.3 * 2 / 3 * 3000 * 0.8 < changed < 0.3 * 2 / 3 * 3000 * 1.2  # resampled, and a different value


def test_same_rng_state_same_result_and_only_the_given_rng_is_used() -> None:
    random.seed(1234)
    global_state = random.getstate()
    a = [explore(PARENT, CONFIG, random.Random(7), 0.5, 0.3) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    assert random.getstate() == global_state
    assert explore(PARENT, CONFIG, random.Random(7), 0.5, 0.3) != explore(PARENT, CONFIG, random.Random(9), 0.5, 0.3)


def test_helper_objects_missing_and_unknown_names() -> None:
    config = {"units": Integer(1, 4), "d": Double(0.0, 1.0), "l": Log(-3, -1, 10), "c": Categorical([1, 2]),
              "k": Constant(3)}
    out = explore({"units": 4, "d": 0.5, "l": 0.01, "c": 2, "k": 3, "extra": "kept"}, config, random.Random(0), 0.0, 1.0)
    assert out["units"] in (4, 1)  # 8 -> clamped to 4, or 0 -> clamped to 1
    assert out["d"] in (1.0, 0.0) and out["l"] in (pytest.approx(0.02), pytest.approx(1e-3))
    assert out["c"] == 2 and out["k"] == 3 and out["extra"] == "kept"
    drawn = explore({}, config, random.Random(0), 0.0, 0.5)  # nothing to perturb: drawn fresh
    assert set(drawn) == set(config) and 1 <= drawn["units"] <= 4 and math.isfinite(drawn["d"])


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="resample_probability.*between 0 and 1"):
        explore(PARENT, CONFIG, random.Random(0), 1.5, 0.1)
    with pytest.raises(ValueError, match="perturb_factor.*between 0 and 1"):
        explore(PARENT, CONFIG, random.Random(0), 0.1, -0.1)
    with pytest.raises(ValueError, match="'five'.*not a number"):
        explore({"units": "five"}, {"units": CONFIG["units"]}, random.Random(0), 0.0, 0.1)
