"""`grid`: one trial per point of the Cartesian product of every hyperparameter's grid values."""
import itertools
import math
from typing import Any, Dict, List, Mapping, Optional

from determined.config import MAX_ALLOWED_TRIALS, canonical_hparam, grid_values
from determined.searcher._context import SearchContext
from determined.searcher._random import FixedTrialsSearch


def grid_axes(hparams_config: Mapping[str, Any]) -> Dict[str, List[Any]]:
    """The values the grid tries for each hyperparameter, in sorted hyperparameter-name order."""
    axes: Dict[str, List[Any]] = {}
    for name in sorted(hparams_config):
        spec = canonical_hparam(hparams_config[name], f"hyperparameters.{name}")
        if spec["type"] in ("int", "double", "log") and spec.get("count") is None:
            raise ValueError(
                f"hyperparameters.{name}: the grid searcher needs `count` for every int/double/log "
                f"hyperparameter; add e.g. `count: 5` to {name}"
            )
        axes[name] = grid_values(spec)
    return axes


def grid_points(hparams_config: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Every point of the grid, the first hyperparameter (by name) varying slowest.

    Raises ValueError when the grid has more than MAX_ALLOWED_TRIALS points.
    """
    axes = grid_axes(hparams_config)
    total = math.prod(len(values) for values in axes.values())
    if total > MAX_ALLOWED_TRIALS:
        factors = " x ".join(f"{name}: {len(values)}" for name, values in axes.items() if len(values) > 1)
        raise ValueError(
            f"searcher: the grid has {total} points ({factors}), more than the maximum of {MAX_ALLOWED_TRIALS} "
            f"trials; lower the count or the number of vals of some hyperparameters"
        )
    names = list(axes)
    order = list(hparams_config)
    points = []
    for values in itertools.product(*(axes[name] for name in names)):
        by_name = dict(zip(names, values))
        points.append({name: by_name[name] for name in order})
    return points


class GridSearch(FixedTrialsSearch):
    """One trial per grid point; each trains to `max_length`, validates and closes."""

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "GridSearch":
        """The grid search a canonical `searcher` section describes."""
        from determined.searcher._searcher import config_int, config_length

        unit, max_length = config_length(searcher_config, "max_length")
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
