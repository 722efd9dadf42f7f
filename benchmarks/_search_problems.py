"""The problems of `search_quality.py`: a search space in Determined's hyperparameter format, a maximum length
in fidelity units, and an incremental objective (a trial that is asked for a longer length trains only the
extra units, as a promoted trial does on the platform).

* ``hartmann``: mf-prior-bench's multi-fidelity Hartmann function (``mfh6_good`` by default): hyperparameters
  ``X_0..X_{d-1}`` as doubles in [0, 1], the fidelity ``z`` (1..100) as the length, minimise ``value``.
* ``digits-mlp``: a one-hidden-layer PyTorch MLP on scikit-learn's digits (fixed stratified 80/20 split);
  hyperparameters learning rate (log), hidden width (int), dropout (double); the length is in epochs; the
  metric is the validation error (minimise). Each trial keeps its model and optimizer by key and resumes.
"""
import copy
import dataclasses
import math
import re
import zlib
from typing import Any, Callable, Dict, Mapping, Optional

# (key, hparams, length, parent_key) -> metric at the cumulative `length`; the signature of the simulator's
# objective, so the same object serves our search methods and Optuna's loop.
Objective = Callable[[str, Dict[str, Any], int, Optional[str]], float]


@dataclasses.dataclass(frozen=True)
class SearchProblem:
    """One benchmark problem: the same space and objective for every search method."""

    name: str
    description: str
    hparams: Dict[str, Any]  # Determined's canonical hyperparameter specs (type double/int/log/...)
    max_length: int  # the full fidelity, in `unit`
    unit: str  # "batches" or "epochs": the searcher config unit whose values are the fidelity
    make_objective: Callable[[int], Objective]  # seed -> a fresh objective with no trained trials


def suggest_hparams(trial: Any, hparams: Mapping[str, Any]) -> Dict[str, Any]:
    """The Optuna counterpart of Determined's sampling: the same ranges and scales for an `optuna.Trial`."""
    values: Dict[str, Any] = {}
    for name in sorted(hparams):
        spec = hparams[name]
        kind = spec["type"]
        if kind == "const":
            values[name] = spec["val"]
        elif kind == "double":
            values[name] = trial.suggest_float(name, spec["minval"], spec["maxval"])
        elif kind == "log":
            low, high = spec["base"] ** spec["minval"], spec["base"] ** spec["maxval"]
            values[name] = trial.suggest_float(name, low, high, log=True)
        elif kind == "int":
            values[name] = trial.suggest_int(name, spec["minval"], spec["maxval"])
        elif kind == "categorical":
            values[name] = trial.suggest_categorical(name, list(spec["vals"]))
        else:
            raise ValueError(f"hyperparameter {name!r}: unknown type {kind!r}; expected const, double, log, int or categorical")
    return values


# -- 1. multi-fidelity Hartmann (mf-prior-bench) -----------------------------------------------------------


def hartmann_problem(benchmark_name: str = "mfh6_good") -> SearchProblem:
    """mf-prior-bench's `benchmark_name` (mfh3_* or mfh6_*): deterministic for a (config, fidelity) pair."""
    import mfpbench

    if not re.fullmatch(r"mfh[36](_(terrible|bad|moderate|good))?", benchmark_name):
        raise ValueError(
            f"--hartmann: {benchmark_name!r} is not one of mf-prior-bench's Hartmann benchmarks; use mfh3 or mfh6 "
            "with an optional suffix _terrible, _bad, _moderate or _good, e.g. mfh6_good"
        )
    bench = mfpbench.get(benchmark_name)
    names = sorted(bench.space.keys(), key=lambda k: int(k.split("_")[-1]))
    low, high = int(bench.fidelity_range[0]), int(bench.fidelity_range[1])

    def make_objective(seed: int) -> Objective:
        def objective(key: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
            fidelity = max(low, min(high, int(length)))
            return float(bench.query({name: float(hparams[name]) for name in names}, at=fidelity).error)

        return objective

    return SearchProblem(
        name=f"hartmann ({benchmark_name})",
        description=(
            f"mf-prior-bench {benchmark_name}: {len(names)} doubles in [0, 1], fidelity z = length in "
            f"{low}..{high}, minimise the value (optimum {bench.Result.metric_defs['value'].bounds[0]})"
        ),
        hparams={name: {"type": "double", "minval": 0.0, "maxval": 1.0} for name in names},
        max_length=high,
        unit="batches",
        make_objective=make_objective,
    )


# -- 2. a PyTorch MLP on scikit-learn's digits -------------------------------------------------------------

DIGITS_HPARAMS: Dict[str, Any] = {
    "learning_rate": {"type": "log", "base": 10.0, "minval": -4.0, "maxval": -0.5},
    "hidden_size": {"type": "int", "minval": 4, "maxval": 128},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.7},
}
DIGITS_BATCH_SIZE = 128


class _DigitsTrials:
    """Every trial's model, optimizer and shuffling state by key; `__call__` trains a trial up to `length`
    epochs (only the epochs it has not trained yet) and returns its validation error."""

    def __init__(self, seed: int) -> None:
        import numpy as np
        import torch
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        torch.set_num_threads(1)
        x, y = load_digits(return_X_y=True)
        x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
        mean, std = x_train.mean(axis=0), x_train.std(axis=0)
        std[std == 0] = 1.0
        self.x_train = torch.tensor((x_train - mean) / std, dtype=torch.float32)
        self.y_train = torch.tensor(y_train, dtype=torch.int64)
        self.x_val = torch.tensor((x_val - mean) / std, dtype=torch.float32)
        self.y_val = torch.tensor(np.asarray(y_val), dtype=torch.int64)
        self.seed = seed
        self.states: Dict[str, Dict[str, Any]] = {}

    def _new_state(self, key: str, hparams: Dict[str, Any]) -> Dict[str, Any]:
        import torch
        from torch import nn

        trial_seed = zlib.crc32(f"{self.seed}/{key}".encode())
        torch.manual_seed(trial_seed)
        width = int(hparams["hidden_size"])
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Dropout(float(hparams["dropout"])), nn.Linear(width, 10))
        optimizer = torch.optim.Adam(model.parameters(), lr=float(hparams["learning_rate"]))
        generator = torch.Generator().manual_seed(trial_seed)
        return {"model": model, "optimizer": optimizer, "generator": generator, "epochs": 0}

    def _state(self, key: str, hparams: Dict[str, Any], parent: Optional[str]) -> Dict[str, Any]:
        if key not in self.states:
            if parent is not None and parent in self.states:
                # A clone starts from its parent's weights and counts its own epochs from 0 (as on the platform).
                state = self._new_state(key, hparams)
                state["model"].load_state_dict(copy.deepcopy(self.states[parent]["model"].state_dict()))
                self.states[key] = state
            else:
                self.states[key] = self._new_state(key, hparams)
        return self.states[key]

    def __call__(self, key: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
        import torch
        from torch.nn import functional

        state = self._state(key, hparams, parent)
        model, optimizer = state["model"], state["optimizer"]
        model.train()
        n = self.x_train.shape[0]
        while state["epochs"] < length:
            order = torch.randperm(n, generator=state["generator"])
            for start in range(0, n, DIGITS_BATCH_SIZE):
                idx = order[start : start + DIGITS_BATCH_SIZE]
                loss = functional.cross_entropy(model(self.x_train[idx]), self.y_train[idx])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            state["epochs"] += 1
        model.eval()
        with torch.no_grad():
            logits = model(self.x_val)
        error = float((logits.argmax(dim=1) != self.y_val).float().mean())
        # A diverged model (NaN logits) is as bad as guessing; keep the metric a finite number.
        return error if math.isfinite(error) else 1.0


def digits_mlp_problem(max_epochs: int = 16) -> SearchProblem:
    """The digits MLP with `max_epochs` as the full fidelity."""
    if max_epochs < 1:
        raise ValueError(f"--epochs: the digits MLP needs at least 1 epoch, got {max_epochs}")
    return SearchProblem(
        name="digits-mlp",
        description=(
            f"MLP 64-h-10 (Adam, batch {DIGITS_BATCH_SIZE}) on sklearn digits, 1437 train / 360 validation; "
            f"lr log10 in [-4, -0.5], hidden_size int in [4, 128], dropout in [0, 0.7]; length = epochs "
            f"(max {max_epochs}); minimise validation error"
        ),
        hparams=copy.deepcopy(DIGITS_HPARAMS),
        max_length=max_epochs,
        unit="epochs",
        make_objective=lambda seed: _DigitsTrials(seed),
    )
