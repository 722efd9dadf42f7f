"""Hyperparameters: the ``det.Constant``... helpers, validation to the canonical form, sampling and grid values.

Canonical forms: ``{"type": "const", "val": v}``, ``{"type": "int", "minval", "maxval", "count"}``,
``{"type": "double", "minval", "maxval", "count"}``, ``{"type": "log", "base", "minval", "maxval", "count"}``
(minval/maxval are exponents of base), ``{"type": "categorical", "vals": [...]}``; ``count`` is None when not given.
"""
import math
import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from determined.config.errors import InvalidExperimentConfig, Problems, describe, join_path, key_path
from determined.config.fields import INVALID, Field, Int, JSONValue, ListOf, Number, REQUIRED, Section, Spec, Union

HPARAM_TYPES = ("const", "int", "double", "log", "categorical")


class HParam:
    """Base of the hyperparameter helpers; ``to_dict()`` gives the config form."""

    def to_dict(self) -> Dict[str, Any]:
        raise TypeError("use Constant, Integer, Double, Log or Categorical")

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "type")
        return f"{type(self).__name__}({args})"


class Constant(HParam):
    """A hyperparameter with one fixed value."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "const", "val": self.value}


class Integer(HParam):
    """An int hyperparameter between minval and maxval; ``count`` values are used by the grid searcher."""

    def __init__(self, minval: int, maxval: int, count: Optional[int] = None) -> None:
        self.minval, self.maxval, self.count = minval, maxval, count

    def to_dict(self) -> Dict[str, Any]:
        return _with_count({"type": "int", "minval": self.minval, "maxval": self.maxval}, self.count)


class Double(HParam):
    """A float hyperparameter between minval and maxval."""

    def __init__(self, minval: float, maxval: float, count: Optional[int] = None) -> None:
        self.minval, self.maxval, self.count = minval, maxval, count

    def to_dict(self) -> Dict[str, Any]:
        return _with_count({"type": "double", "minval": self.minval, "maxval": self.maxval}, self.count)


class Log(HParam):
    """A hyperparameter ``base ** x`` with the exponent x between minval and maxval."""

    def __init__(self, minval: float, maxval: float, base: float, count: Optional[int] = None) -> None:
        self.minval, self.maxval, self.base, self.count = minval, maxval, base, count

    def to_dict(self) -> Dict[str, Any]:
        spec = {"type": "log", "minval": self.minval, "maxval": self.maxval, "base": self.base}
        return _with_count(spec, self.count)


class Categorical(HParam):
    """A hyperparameter taking one of the given values."""

    def __init__(self, vals: Sequence[Any]) -> None:
        self.vals = list(vals)

    def to_dict(self) -> Dict[str, Any]:
        return {"type": "categorical", "vals": list(self.vals)}


def _with_count(spec: Dict[str, Any], count: Optional[int]) -> Dict[str, Any]:
    if count is not None:
        spec["count"] = count
    return spec


_COUNT = Field(Int(minimum=1), None)
_SPECS = Union(
    {
        "const": Section({"val": Field(JSONValue(), None)}),
        "int": Section({"minval": Field(Int(), REQUIRED), "maxval": Field(Int(), REQUIRED), "count": _COUNT}),
        "double": Section(
            {
                "minval": Field(Number(as_float=True), REQUIRED),
                "maxval": Field(Number(as_float=True), REQUIRED),
                "count": _COUNT,
            }
        ),
        "log": Section(
            {
                "base": Field(Number(minimum=0, exclusive_min=True, as_float=True), 10.0),
                "minval": Field(Number(as_float=True), REQUIRED),
                "maxval": Field(Number(as_float=True), REQUIRED),
                "count": _COUNT,
            }
        ),
        "categorical": Section({"vals": Field(ListOf(JSONValue(), nonempty=True), REQUIRED)}),
    }
)


def is_group(value: Any) -> bool:
    """True for a group of hyperparameters: a mapping without ``type`` (Determined 0.14+ nests them, any depth)."""
    return isinstance(value, Mapping) and "type" not in value


def check_hparam(value: Any, path: str, problems: Problems) -> Any:
    """The canonical form of one hyperparameter or group, or INVALID after reporting its problems.

    A mapping without ``type`` is a group: a mapping of names to hyperparameters (or groups), canonical member by
    member. Any other mapping is a spec; a non-mapping value (a scalar, a list) is a constant.
    """
    if isinstance(value, HParam):
        value = value.to_dict()
    if is_group(value):
        return _check_group(value, path, problems)
    if not isinstance(value, Mapping):
        return {"type": "const", "val": JSONValue().check(value, join_path(path, "val"), problems)}
    if value["type"] == "const" and "val" not in value:
        problems.missing(join_path(path, "val"), "the constant's value")
        return INVALID
    out = _SPECS.check(value, path, problems)
    if out is INVALID or any(v is INVALID for v in out.values()):
        return INVALID
    if out["type"] in ("int", "double", "log") and out["minval"] > out["maxval"]:
        problems.add(
            path, f"minval {out['minval']} is greater than maxval {out['maxval']}", "minval must be <= maxval"
        )
        return INVALID
    if out["type"] == "log" and out["base"] == 1.0:
        problems.wrong_value(join_path(path, "base"), out["base"], "a number > 0 other than 1")
        return INVALID
    if out["type"] == "log" and not _log_range_is_finite(out, path, problems):
        return INVALID
    return out


def _log_range_is_finite(spec: Mapping[str, Any], path: str, problems: Problems) -> bool:
    """Every value `base ** x` of a log hyperparameter is a float that is neither infinite nor 0 (Python's
    `**` raises OverflowError beyond about 1.8e308, and gives 0.0 below about 5e-324): a trial would fail, or train
    with 0, where the exponents were meant."""
    base = spec["base"]
    for name in ("minval", "maxval"):
        try:
            value = base ** spec[name]
        except OverflowError:
            value = math.inf
        if math.isinf(value) or value == 0.0:
            what = "beyond the largest float (about 1.8e308)" if math.isinf(value) else "0 in floating point"
            problems.add(join_path(path, name), f"{base:g} ** {spec[name]:g} is {what}",
                         "minval and maxval are exponents of base: for 1e-5 to 1e-1 with base 10, give minval -5 "
                         "and maxval -1")
            return False
    return True


def _check_group(value: Mapping[Any, Any], path: str, problems: Problems) -> Any:
    out: Dict[str, Any] = {}
    for name, spec in value.items():
        if not isinstance(name, str):
            problems.wrong_value(key_path(path, name), name, "hyperparameter names must be strings")
            continue
        out[name] = check_hparam(spec, join_path(path, name), problems)
    return out


class Hyperparameters(Spec):
    allowed = (
        "a mapping of hyperparameter names to values, {type: const|int|double|log|categorical, ...}, "
        "or mappings of them (nested groups)"
    )

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        return _check_group(value, path, problems)


def canonical_hparam(value: Any, name: str = "hparam") -> Dict[str, Any]:
    """The canonical form of one hyperparameter (or group); raises InvalidExperimentConfig if it is not valid."""
    problems = Problems()
    out = check_hparam(value, name, problems)
    problems.raise_if_any("invalid hyperparameter")
    return out


def canonical_hparams(hparams: Mapping[str, Any]) -> Dict[str, Any]:
    """The canonical form of a whole ``hyperparameters`` section; raises InvalidExperimentConfig if not valid."""
    problems = Problems()
    out = Hyperparameters().check(hparams, "hyperparameters", problems)
    problems.raise_if_any("invalid hyperparameters")
    return dict(out)


Path = Tuple[str, ...]


def hparam_leaves(hparams: Mapping[str, Any], sort: bool = True) -> List[Tuple[Path, Dict[str, Any]]]:
    """Every hyperparameter of a canonical section with its path (names from the top), groups walked depth first
    in sorted name order (the order in which values are drawn and grid axes are laid out), or in the config's
    order with ``sort=False``."""
    out: List[Tuple[Path, Dict[str, Any]]] = []

    def walk(group: Mapping[str, Any], prefix: Path) -> None:
        for name in sorted(group) if sort else list(group):
            spec = group[name]
            if is_group(spec):
                walk(spec, prefix + (name,))
            else:
                out.append((prefix + (name,), spec))

    walk(hparams, ())
    return out


def nest_values(hparams: Mapping[str, Any], values: Mapping[Path, Any]) -> Dict[str, Any]:
    """The nested values of a canonical section from values by leaf path, keys in the section's own order."""

    def build(group: Mapping[str, Any], prefix: Path) -> Dict[str, Any]:
        return {
            name: build(spec, prefix + (name,)) if is_group(spec) else values[prefix + (name,)]
            for name, spec in group.items()
        }

    return build(hparams, ())


def dotted(path: Path) -> str:
    """The name a UI or a table shows for a nested hyperparameter: its path joined with dots."""
    return ".".join(path)


def flat_hparams(values: Mapping[str, Any], specs: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A trial's hyperparameter values with nested ones under dotted names (``{"optim": {"lr": 1}}`` ->
    ``{"optim.lr": 1}``), for tables and charts only: trials get the nested values.

    With the experiment's ``hyperparameters`` section (``specs``), its leaves decide what is a group (a constant or
    categorical whose value is a mapping stays one value), in the section's order; without, every non-empty
    mapping is walked.
    """
    out: Dict[str, Any] = {}
    if specs is not None:
        try:
            leaves = hparam_leaves(canonical_hparams(specs), sort=False)
        except InvalidExperimentConfig:
            leaves = None
        if leaves is not None:
            for path, _ in leaves:
                value: Any = values
                for name in path:
                    value = value.get(name, _MISSING) if isinstance(value, Mapping) else _MISSING
                if value is not _MISSING:
                    out[dotted(path)] = value
            return out

    def walk(group: Mapping[str, Any], prefix: str) -> None:
        for name, value in group.items():
            key = f"{prefix}{name}"
            if isinstance(value, Mapping) and value:
                walk(value, key + ".")
            else:
                out[key] = value

    walk(values, "")
    return out


_MISSING = object()


GLOBAL_BATCH_SIZE_HOW = (
    "add it under hyperparameters, e.g. `hyperparameters: {global_batch_size: 32}` "
    "(the number of records per batch summed over all slots; must be a positive int)"
)


def check_global_batch_size(
    hparams: Mapping[str, Any], slots_per_trial: Any, problems: Problems, required_by: str = ""
) -> None:
    """When given, ``global_batch_size`` must always be a positive int (and at least slots_per_trial).

    It is required only where something needs it (as in Determined 0.38): ``required_by`` says what (lengths in
    records or epochs, which the master converts to batches with it); the Trial APIs that need it check it when
    the trial starts (TFKerasTrial, and the batch-size getters of every trial context).
    """
    path = "hyperparameters.global_batch_size"
    spec = hparams.get("global_batch_size")
    if spec is None:
        if required_by:
            problems.missing(path, f"{required_by} need it: {GLOBAL_BATCH_SIZE_HOW}")
        return
    if spec is INVALID:
        return
    minimum = slots_per_trial if isinstance(slots_per_trial, int) and slots_per_trial > 1 else 1
    allowed = f"a positive int{f' >= resources.slots_per_trial ({minimum})' if minimum > 1 else ''}: {GLOBAL_BATCH_SIZE_HOW}"
    kind = spec.get("type")
    if kind == "const":
        values = [spec["val"]]
    elif kind == "int":
        values = [spec["minval"]]
    elif kind == "categorical":
        values = spec["vals"]
    elif kind is None:
        problems.add(path, "is a group of hyperparameters", allowed)
        return
    else:
        problems.add(path, f"a {kind} hyperparameter gives non-integer batch sizes", allowed)
        return
    for val in values:
        if isinstance(val, bool) or not isinstance(val, int) or val < minimum:
            problems.add(path, f"got {describe(val)}", allowed)
            return


def sample_hparams(hparams: Mapping[str, Any], rng: random.Random) -> Dict[str, Any]:
    """Draw one value for every hyperparameter; a group gives a mapping of its members' values (any depth).

    const -> its value; int -> uniform over minval..maxval, both ends INCLUSIVE (Determined's Go code never draws
    maxval; its docs say inclusive, and we follow the docs); double -> uniform(minval, maxval);
    log -> base ** uniform(minval, maxval); categorical -> a uniform choice of vals.
    Values are drawn leaf by leaf in sorted name order (groups depth first, see ``hparam_leaves``), so the result
    depends only on the rng's state and the specs.
    """
    specs = canonical_hparams(hparams)
    drawn = {path: _sample_one(spec, rng) for path, spec in hparam_leaves(specs)}
    return nest_values(specs, drawn)


def _sample_one(spec: Mapping[str, Any], rng: random.Random) -> Any:
    kind = spec["type"]
    if kind == "const":
        return spec["val"]
    if kind == "int":
        return rng.randint(spec["minval"], spec["maxval"])
    if kind == "double":
        return rng.uniform(spec["minval"], spec["maxval"])
    if kind == "log":
        return spec["base"] ** rng.uniform(spec["minval"], spec["maxval"])
    return rng.choice(spec["vals"])


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def grid_values(hparam: Any) -> List[Any]:
    """The values the grid searcher tries for one hyperparameter.

    const -> [val]; categorical -> vals; int -> ``count`` evenly spaced ints from minval to maxval, rounded,
    count clamped to maxval-minval+1, count 1 -> the midpoint ``(minval+maxval)//2``; double -> ``count`` evenly
    spaced floats including both ends, count 1 -> the midpoint; log -> base ** (exponents spaced like double).
    """
    spec = canonical_hparam(hparam)
    kind = spec["type"]
    if kind == "const":
        return [spec["val"]]
    if kind == "categorical":
        return list(spec["vals"])
    count = spec["count"]
    if count is None:
        raise InvalidExperimentConfig(
            [f"hparam: a {kind} hyperparameter has no count; the grid searcher needs `count` (a positive int)"],
            "invalid hyperparameter",
        )
    low, high = spec["minval"], spec["maxval"]
    if kind == "int":
        count = min(count, high - low + 1)
        if count == 1:
            return [(low + high) // 2]
        return [low + _round_half_up(i * (high - low) / (count - 1)) for i in range(count)]
    points = [(low + high) / 2] if count == 1 else [low + i * (high - low) / (count - 1) for i in range(count)]
    if count > 1:
        points[-1] = high
    if kind == "double":
        return points
    return [spec["base"] ** x for x in points]
