"""`grid`: one trial per point of the Cartesian product of every hyperparameter's grid values."""
import itertools
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from determined.config import MAX_ALLOWED_TRIALS, canonical_hparams, dotted, grid_values, hparam_leaves, nest_values
from determined.searcher._config_fields import config_int, optional_config_length
from determined.searcher._context import SearchContext
from determined.searcher._random import FixedTrialsSearch


def _axes(hparams_config: Mapping[str, Any]) -> List[Tuple[Tuple[str, ...], List[Any]]]:
    """The values the grid tries for each hyperparameter (nested ones too), by path, in sorted path order."""
    axes = []
    for path, spec in hparam_leaves(canonical_hparams(hparams_config)):
        if spec["type"] in ("int", "double", "log") and spec.get("count") is None:
            name = dotted(path)
            raise ValueError(
                f"hyperparameters.{name}: the grid searcher needs `count` for every int/double/log "
                f"hyperparameter; add e.g. `count: 5` to {name}"
            )
        axes.append((path, grid_values(spec)))
    return axes


def grid_axes(hparams_config: Mapping[str, Any]) -> Dict[str, List[Any]]:
    """The values the grid tries for each hyperparameter, by dotted name (``optim.lr`` for a nested one), in
    sorted order."""
    return {dotted(path): values for path, values in _axes(hparams_config)}


def grid_points(hparams_config: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Every point of the grid (nested hyperparameters as nested mappings), the first hyperparameter (by sorted
    path) varying slowest.

    Raises ValueError when the grid has more than MAX_ALLOWED_TRIALS points.
    """
    axes = _axes(hparams_config)
    total = math.prod(len(values) for _, values in axes)
    if total > MAX_ALLOWED_TRIALS:
        factors = " x ".join(f"{dotted(path)}: {len(values)}" for path, values in axes if len(values) > 1)
        raise ValueError(
            f"searcher: the grid has {total} points ({factors}), more than the maximum of {MAX_ALLOWED_TRIALS} "
            f"trials; lower the count or the number of vals of some hyperparameters"
        )
    specs = canonical_hparams(hparams_config)
    paths = [path for path, _ in axes]
    return [nest_values(specs, dict(zip(paths, values))) for values in itertools.product(*(v for _, v in axes))]


class GridSearch(FixedTrialsSearch):
    """One trial per grid point; each trains to `max_length`, validates and closes (or, without max_length, runs its
    own loop until its process exits)."""

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "GridSearch":
        """The grid search a canonical `searcher` section describes."""
        unit, max_length = optional_config_length(searcher_config, "max_length")
        return cls(max_length=max_length, unit=unit,
                   max_concurrent_trials=config_int(searcher_config, "max_concurrent_trials", 0))

    _points: Optional[List[Dict[str, Any]]] = None

    def _hparams_of(self, ctx: SearchContext, index: int) -> Dict[str, Any]:
        if self._points is None:  # computed once per instance (the master builds one per event)
            self._points = grid_points(ctx.hparams_config)
        return self._points[index]

    def _trial_count(self, ctx: SearchContext) -> int:
        return len(grid_points(ctx.hparams_config))

    def describe(self, hparams_config: Mapping[str, Any]) -> Dict[str, Any]:
        """The grid's size and values per hyperparameter (plain JSON)."""
        axes = grid_axes(hparams_config)
        return {
            "trials": math.prod(len(values) for values in axes.values()),
            "values": {name: list(values) for name, values in axes.items()},
            "max_length": self.max_length,
        }
