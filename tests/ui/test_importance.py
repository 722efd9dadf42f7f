"""Hyperparameter importance (determined/master/insights/importance.py) on synthetic data with a known answer."""
import numpy as np

from determined.master.insights.importance import RandomForest, first_order_importance, hyperparameter_importance


def test_the_hyperparameter_that_matters_gets_the_importance() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(size=(40, 2))
    y = 4.0 * x[:, 0] ** 2 + 0.01 * rng.normal(size=40)  # column 0 matters, column 1 does not
    shares = first_order_importance(x, y, seed=1)
    assert shares[0] > 0.8
    assert shares[1] < 0.05


def test_additive_effects_share_the_variance_in_proportion() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(120, 3))
    y = 2.0 * x[:, 0] + 1.0 * x[:, 1]  # variance 4/12 against 1/12; column 2 is noise-free and useless
    shares = first_order_importance(x, y, seed=0)
    assert shares[0] > 2.5 * shares[1] > 0
    assert shares[2] < 0.03
    assert abs(shares.sum() - 1.0) < 0.05  # additive: the first-order effects explain (nearly) everything


def test_forest_fits_a_step_function() -> None:
    x = np.linspace(0, 1, 50)[:, None]
    y = (x[:, 0] > 0.5).astype(float)
    forest = RandomForest(n_trees=10, seed=0).fit(x, y)
    assert np.abs(forest.predict(np.array([[0.1], [0.9]])) - [0.0, 1.0]).max() < 0.2


def test_hparam_specs_categorical_log_and_const() -> None:
    rng = np.random.default_rng(5)
    specs = {"lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1}, "opt": {"type": "categorical",
             "vals": ["sgd", "adam"]}, "bs": {"type": "const", "val": 32}}
    trials = []
    for _ in range(30):
        lr = float(10 ** rng.uniform(-4, -1))
        opt = str(rng.choice(["sgd", "adam"]))
        trials.append(({"lr": lr, "opt": opt, "bs": 32}, (1.0 if opt == "adam" else 0.0) + 0.001 * lr))
    shares = hyperparameter_importance(specs, trials, seed=0)
    assert set(shares) == {"lr", "opt"}  # constants are not searched
    assert shares["opt"] > 0.9 and shares["lr"] < 0.05


def test_too_few_trials_or_no_finite_metric_give_nothing() -> None:
    specs = {"a": {"type": "double", "minval": 0, "maxval": 1}}
    assert hyperparameter_importance(specs, [({"a": 0.1}, 1.0), ({"a": 0.2}, 2.0)]) == {}
    assert hyperparameter_importance(specs, [({"a": v}, float("nan")) for v in (0.1, 0.2, 0.3, 0.4)]) == {}
    assert hyperparameter_importance(specs, [({"a": v}, 1.0) for v in (0.1, 0.2, 0.3)]) == {"a": 0.0}
