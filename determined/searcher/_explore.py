"""PBT's explore step: new hyperparameter values near (or resampled from) a parent's."""
import copy
import math
import random
from typing import Any, Dict, Mapping, Tuple

from determined.config import canonical_hparams, hparam_leaves, sample_hparams


def explore(
    hparams: Mapping[str, Any],
    hparams_config: Mapping[str, Any],
    rng: random.Random,
    resample_probability: float,
    perturb_factor: float,
) -> Dict[str, Any]:
    """Explored hyperparameters for a clone of a trial whose values are `hparams`.

    Per hyperparameter of `hparams_config`, nested ones too (leaf by leaf in sorted path order, so that the draws
    depend only on `rng`):
    with probability `resample_probability` a fresh draw from its configured distribution; otherwise a
    numeric value is multiplied by `1 + perturb_factor` or `1 - perturb_factor` (50/50) and clamped to its
    range: int rounds up (ceil) when going up and down (floor) when going down, then clamps to
    [minval, maxval]; double clamps to [minval, maxval]; log clamps to [base**minval, base**maxval].
    const and categorical values are kept unless resampled. A value missing from `hparams` is drawn
    fresh; values of names the config does not know are kept as they are.
    """
    if not 0 <= resample_probability <= 1:
        raise ValueError(
            f"searcher.explore_function.resample_probability: got {resample_probability}; must be between 0 and 1"
        )
    if not 0 <= perturb_factor <= 1:
        raise ValueError(f"searcher.explore_function.perturb_factor: got {perturb_factor}; must be between 0 and 1")
    specs = canonical_hparams(hparams_config)
    out = copy.deepcopy(dict(hparams))
    for path, spec in hparam_leaves(specs):
        group, name = _group_of(out, path)
        resample = rng.random() < resample_probability
        if resample or name not in group:
            group[name] = _sample_leaf(spec, rng)
        elif spec["type"] in ("int", "double", "log"):
            group[name] = _perturb(spec, group[name], rng.random() < 0.5, perturb_factor)
    return out


def _group_of(values: Dict[str, Any], path: Tuple[str, ...]) -> Tuple[Dict[str, Any], str]:
    """The mapping that holds the value at ``path`` (made when missing or not a mapping), and its key there."""
    group = values
    for name in path[:-1]:
        if not isinstance(group.get(name), dict):
            group[name] = {}
        group = group[name]
    return group, path[-1]


def _sample_leaf(spec: Mapping[str, Any], rng: random.Random) -> Any:
    return sample_hparams({"x": spec}, rng)["x"]


def _perturb(spec: Mapping[str, Any], value: Any, up: bool, factor: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(
            f"cannot perturb the {spec['type']} hyperparameter value {value!r}: it is not a number; "
            f"check that the trial's hyperparameters match the experiment's config"
        )
    scaled = value * (1 + factor) if up else value * (1 - factor)
    kind = spec["type"]
    if kind == "int":
        rounded = math.ceil(scaled) if up else math.floor(scaled)
        return int(min(max(rounded, spec["minval"]), spec["maxval"]))
    if kind == "double":
        return float(min(max(scaled, spec["minval"]), spec["maxval"]))
    low, high = spec["base"] ** spec["minval"], spec["base"] ** spec["maxval"]
    return float(min(max(scaled, min(low, high)), max(low, high)))
