"""Hyperparameter importance, in pure numpy: a small random forest and a first-order variance decomposition.

For each hyperparameter j, the forest's partial dependence PD_j(v) = mean over the trials of f(x with x_j = v)
is evaluated at every observed value v of x_j; the importance of j is Var_v[PD_j(v)] / Var[f(X)], the share of
the predicted metric's variance that j explains on its own (the first-order term of a functional ANOVA over
the empirical distribution of the trials, as fANOVA does over the forest). The shares need not sum to 1: the
remainder is interactions.
"""
import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

MIN_TRIALS = 3
MAX_BACKGROUND = 64  # rows the partial dependence averages over
MAX_GRID = 32  # values of a column it is evaluated at


@dataclasses.dataclass
class _Tree:
    """A regression tree as parallel arrays; a node with feature -1 is a leaf."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        node = np.zeros(len(x), dtype=np.int64)
        rows = np.arange(len(x))
        while True:
            feature = self.feature[node]
            inner = feature >= 0
            if not inner.any():
                return self.value[node]
            go_left = x[rows[inner], feature[inner]] <= self.threshold[node[inner]]
            node[inner] = np.where(go_left, self.left[node[inner]], self.right[node[inner]])


def _best_split(x: np.ndarray, y: np.ndarray, features: np.ndarray, min_leaf: int) -> Optional[Tuple[int, float]]:
    """The (feature, threshold) that lowers the sum of squared errors most, or None when nothing does."""
    best: Optional[Tuple[int, float]] = None
    best_sse = float(((y - y.mean()) ** 2).sum()) - 1e-12
    n = len(y)
    for f in features:
        order = np.argsort(x[:, f], kind="stable")
        xs, ys = x[order, f], y[order]
        csum, csq = np.cumsum(ys), np.cumsum(ys * ys)
        left_n = np.arange(1, n)
        left_sse = csq[:-1] - csum[:-1] ** 2 / left_n
        right_sum, right_sq = csum[-1] - csum[:-1], csq[-1] - csq[:-1]
        right_sse = right_sq - right_sum ** 2 / (n - left_n)
        sse = left_sse + right_sse
        valid = (xs[1:] > xs[:-1]) & (left_n >= min_leaf) & (n - left_n >= min_leaf)
        if not valid.any():
            continue
        sse = np.where(valid, sse, np.inf)
        i = int(np.argmin(sse))
        if sse[i] < best_sse:
            best_sse = float(sse[i])
            best = (int(f), float((xs[i] + xs[i + 1]) / 2.0))
    return best


def _grow(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, max_features: int, min_leaf: int,
          max_depth: int) -> _Tree:
    feature: List[int] = []
    threshold: List[float] = []
    left: List[int] = []
    right: List[int] = []
    value: List[float] = []
    stack = [(np.arange(len(y)), 0, -1, False)]
    while stack:
        rows, depth, parent, is_right = stack.pop()
        node = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        value.append(float(y[rows].mean()))
        if parent >= 0:
            (right if is_right else left)[parent] = node
        if depth >= max_depth or len(rows) < 2 * min_leaf:
            continue
        candidates = rng.choice(x.shape[1], size=min(max_features, x.shape[1]), replace=False)
        split = _best_split(x[rows], y[rows], candidates, min_leaf)
        if split is None:
            continue
        f, t = split
        feature[node], threshold[node] = f, t
        go_left = x[rows, f] <= t
        stack.append((rows[~go_left], depth + 1, node, True))
        stack.append((rows[go_left], depth + 1, node, False))
    return _Tree(np.array(feature), np.array(threshold), np.array(left), np.array(right), np.array(value))


class RandomForest:
    """Bagged regression trees with a random subset of features tried at each split."""

    def __init__(self, n_trees: int = 48, max_features: Optional[int] = None, min_leaf: int = 1,
                 max_depth: int = 12, seed: int = 0) -> None:
        self.n_trees = n_trees
        self.max_features = max_features
        self.min_leaf = min_leaf
        self.max_depth = max_depth
        self.seed = seed
        self.trees: List[_Tree] = []

    def fit(self, x: np.ndarray, y: np.ndarray) -> "RandomForest":
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        rng = np.random.default_rng(self.seed)
        max_features = self.max_features or max(1, math.ceil(x.shape[1] * 2 / 3))
        self.trees = []
        for _ in range(self.n_trees):
            rows = rng.integers(0, len(y), size=len(y))
            self.trees.append(_grow(x[rows], y[rows], rng, max_features, self.min_leaf, self.max_depth))
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return np.mean([tree.predict(x) for tree in self.trees], axis=0)


def first_order_importance(x: np.ndarray, y: np.ndarray, *, seed: int = 0, n_trees: int = 48) -> np.ndarray:
    """Per column of `x`, the share of the variance of a forest fit to (x, y) that the column explains alone."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = x.shape
    if n < MIN_TRIALS or float(np.var(y)) == 0.0:
        return np.zeros(d)
    forest = RandomForest(n_trees=n_trees, seed=seed).fit(x, y)
    total = float(np.var(forest.predict(x)))
    if total <= 0.0:
        return np.zeros(d)
    rng = np.random.default_rng(seed)
    background = x if n <= MAX_BACKGROUND else x[rng.choice(n, MAX_BACKGROUND, replace=False)]
    shares = np.zeros(d)
    for j in range(d):
        values, counts = np.unique(x[:, j], return_counts=True)
        if len(values) < 2:
            continue
        weights = counts / counts.sum()
        if len(values) > MAX_GRID:  # a continuous column: its quantiles, equally weighted
            values = np.quantile(x[:, j], (np.arange(MAX_GRID) + 0.5) / MAX_GRID)
            weights = np.full(MAX_GRID, 1.0 / MAX_GRID)
        grid = np.repeat(background[None, :, :], len(values), axis=0)  # (values, rows, features)
        grid[:, :, j] = values[:, None]
        pd = forest.predict(grid.reshape(-1, d)).reshape(len(values), len(background)).mean(axis=1)
        mean = float(np.sum(weights * pd))
        shares[j] = float(np.sum(weights * (pd - mean) ** 2)) / total
    return np.clip(shares, 0.0, 1.0)


def encode_hparams(hparam_specs: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]) -> Tuple[List[str], np.ndarray]:
    """The searched hyperparameters (not `const`) as columns: numbers as they are (`log` ones as log10),
    categorical and other values as the index of their first appearance. Returns (names, matrix)."""
    names = []
    for name, spec in sorted(hparam_specs.items()):
        kind = spec.get("type") if isinstance(spec, Mapping) else "const"
        if kind in (None, "const"):
            continue
        names.append(name)
    columns = []
    for name in names:
        spec = hparam_specs[name]
        raw = [t.get(name) for t in trials]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw)
        if numeric and spec.get("type") != "categorical":
            col = np.array(raw, dtype=float)
            if spec.get("type") == "log":
                col = np.log10(np.maximum(col, 1e-300))
        else:
            codes: Dict[str, int] = {}
            col = np.array([codes.setdefault(repr(v), len(codes)) for v in raw], dtype=float)
        columns.append(col)
    matrix = np.stack(columns, axis=1) if columns else np.zeros((len(trials), 0))
    return names, matrix


def hyperparameter_importance(hparam_specs: Mapping[str, Any], trials: Sequence[Tuple[Mapping[str, Any], float]],
                              *, seed: int = 0) -> Dict[str, float]:
    """{hyperparameter: share of the metric's variance it explains} over `trials` given as (hparams, metric);
    trials whose metric is not finite are left out. Empty with fewer than MIN_TRIALS usable trials."""
    usable = [(h, float(m)) for h, m in trials if isinstance(m, (int, float)) and math.isfinite(m)]
    if len(usable) < MIN_TRIALS:
        return {}
    names, x = encode_hparams(hparam_specs, [h for h, _ in usable])
    if not names:
        return {}
    shares = first_order_importance(x, np.array([m for _, m in usable]), seed=seed)
    return {name: round(float(v), 6) for name, v in zip(names, shares)}
