"""The ``searcher`` section: the fields, defaults and rules of every search method."""
from typing import Any, Callable, Dict, List, Mapping

from determined.config.errors import Problems, describe, join_path
from determined.config.fields import (
    INVALID,
    REQUIRED,
    Bool,
    Enum,
    Field,
    Int,
    ListOf,
    Number,
    Section,
    Spec,
    Str,
    is_int,
)
from determined.config.lengths import Length, length_unit, length_value

MAX_ALLOWED_TRIALS = 2000
MODES = ("standard", "aggressive", "conservative")
# The most rungs a bracket of successive halving may have: num_rungs, each of bracket_rungs, and the rungs that
# max_rungs, divisor, max_trials and the length make (Determined set no bound). A bracket keeps a list per rung in
# the search's state; with the default divisor 4, 100 rungs would need 4^99 trials, so no useful search meets it.
MAX_RUNGS = 100

_COMMON = {
    "metric": Field(Str(nonempty=True, allowed="the name of a validation metric (a string)"), REQUIRED),
    "smaller_is_better": Field(Bool(), True),
    "source_trial_id": Field(Int(minimum=1), None),
    "source_checkpoint_uuid": Field(Str(nonempty=True), None),
}


class SearcherLength(Length):
    """``max_length``: a length, or (Determined 0.18+) a bare positive int, which counts batches here."""

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if isinstance(value, Mapping):
            return super().check(value, path, problems)
        if is_int(value) and value >= 1:
            return {"batches": int(value)}
        problems.add(path, f"got {describe(value)}", f"{self.allowed}, or a positive int (a number of batches)")
        return INVALID


def _max_length(bare_int: bool = False, optional: bool = False) -> Field:
    """`max_length`; `optional` where Determined 0.38 made it optional (the trial's own code says how long to train)."""
    return Field(SearcherLength(positive=True) if bare_int else Length(positive=True), None if optional else REQUIRED)


def _max_trials(maximum: Any = None) -> Field:
    return Field(Int(minimum=1, maximum=maximum), REQUIRED, hint="the number of trials to create, a positive int")


_DIVISOR = Field(Number(minimum=1, exclusive_min=True), 4)
_MAX_RUNGS = Field(Int(minimum=1), 5)
_MODE = Field(Enum(*MODES), "standard")
_CONCURRENT = Field(Int(minimum=0), 0)
_BRACKET_RUNGS = Field(ListOf(Int(minimum=1, maximum=MAX_RUNGS), nonempty=True, max_items=MAX_RUNGS), None)
_NUM_RUNGS = Field(Int(minimum=1, maximum=MAX_RUNGS), REQUIRED)
_STOP_ONCE = Field(Bool(), False)
# 0.38's time-based ASHA: with both, the search stops trials by the values of time_metric they report (see
# searcher_drives_trials); max_length is then only read by the trial's code.
_TIME_METRIC = Field(Str(nonempty=True, allowed="the name of a reported metric that counts time (a string)"), None)
_MAX_TIME = Field(Int(minimum=1), None)

METHOD_FIELDS: Dict[str, Dict[str, Field]] = {
    "single": {"max_length": _max_length(bare_int=True, optional=True)},
    "random": {
        "max_length": _max_length(bare_int=True, optional=True),
        "max_trials": _max_trials(),
        "max_concurrent_trials": _CONCURRENT,
    },
    "grid": {"max_length": _max_length(bare_int=True, optional=True), "max_concurrent_trials": _CONCURRENT},
    "adaptive_asha": {
        "max_length": _max_length(bare_int=True, optional=True),
        "max_trials": _max_trials(),
        "mode": _MODE,
        "divisor": _DIVISOR,
        "max_rungs": _MAX_RUNGS,
        "max_concurrent_trials": _CONCURRENT,
        "bracket_rungs": _BRACKET_RUNGS,
        "stop_once": _STOP_ONCE,
        "time_metric": _TIME_METRIC,
        "max_time": _MAX_TIME,
    },
    "adaptive_simple": {
        "max_length": _max_length(),
        "max_trials": _max_trials(maximum=MAX_ALLOWED_TRIALS),
        "mode": _MODE,
        "divisor": _DIVISOR,
        "max_rungs": _MAX_RUNGS,
    },
    "adaptive": {
        "max_length": _max_length(),
        "budget": Field(Length(positive=True), REQUIRED, hint="the total length of all trials, in max_length's unit"),
        "mode": _MODE,
        "divisor": _DIVISOR,
        "max_rungs": _MAX_RUNGS,
        "bracket_rungs": _BRACKET_RUNGS,
        "train_stragglers": Field(Bool(), True),
    },
    "pbt": {
        "population_size": Field(Int(minimum=1), REQUIRED),
        "num_rounds": Field(Int(minimum=1), REQUIRED),
        "length_per_round": Field(Length(positive=True), REQUIRED),
        "replace_function": Field(
            Section({"truncate_fraction": Field(Number(minimum=0, maximum=0.5), REQUIRED)}), REQUIRED,
            hint="{truncate_fraction: <0..0.5>}",
        ),
        "explore_function": Field(
            Section(
                {
                    "resample_probability": Field(Number(minimum=0, maximum=1), REQUIRED),
                    "perturb_factor": Field(Number(minimum=0, maximum=1), REQUIRED),
                }
            ),
            REQUIRED,
            hint="{resample_probability: <0..1>, perturb_factor: <0..1>}",
        ),
    },
    "sync_halving": {
        "num_rungs": _NUM_RUNGS,
        "max_length": _max_length(),
        "budget": Field(Length(positive=True), REQUIRED, hint="the total length of all trials, in max_length's unit"),
        "divisor": _DIVISOR,
        "train_stragglers": Field(Bool(), True),
    },
    "async_halving": {
        "num_rungs": _NUM_RUNGS,
        "max_length": _max_length(optional=True),
        "max_trials": _max_trials(),
        "divisor": _DIVISOR,
        "max_concurrent_trials": _CONCURRENT,
        "stop_once": _STOP_ONCE,
        "time_metric": _TIME_METRIC,
        "max_time": _MAX_TIME,
    },
    # Determined 0.19.6 to 0.37: a search runner (determined.searcher.LocalSearchRunner) posts the operations.
    "custom": {"unit": Field(Enum("batches", "records", "epochs"), "batches")},
}
SEARCHER_NAMES = tuple(METHOD_FIELDS)
LENGTH_FIELDS = ("max_length", "budget", "length_per_round")
_EXAMPLE = "e.g. {name: single, metric: validation_loss, max_length: {batches: 1000}}"


def _budget_exceeds_max_length(out: Dict[str, Any], problems: Problems) -> None:
    budget, max_length = out.get("budget"), out.get("max_length")
    if budget is INVALID or max_length is INVALID or budget is None or max_length is None:
        return
    if length_unit(budget) != length_unit(max_length):
        problems.add(
            "searcher.budget",
            f"is in {length_unit(budget)} but max_length is in {length_unit(max_length)}",
            "give budget and max_length in the same unit",
        )
    elif length_value(budget) <= length_value(max_length):
        problems.add(
            "searcher.budget",
            f"{length_value(budget)} {length_unit(budget)} is not more than max_length "
            f"({length_value(max_length)} {length_unit(max_length)})",
            "budget must be greater than max_length",
        )


def _time_or_length(out: Dict[str, Any], problems: Problems) -> None:
    """ASHA stops trials by a reported time metric (0.38: time_metric + max_time), or promotes them by max_length
    (0.37 and before): one of the two must be complete."""
    time_metric, max_time = out.get("time_metric"), out.get("max_time")
    if INVALID in (time_metric, max_time, out.get("max_length")):
        return
    if (time_metric is None) != (max_time is None):
        given, missing = ("time_metric", "max_time") if max_time is None else ("max_time", "time_metric")
        problems.add(f"searcher.{missing}", f"is missing while {given} is set",
                     "give both time_metric (the name of a reported metric that counts time, e.g. batches) and "
                     "max_time (the value of it a trial trains to)")
    elif time_metric is None and out.get("max_length") is None:
        problems.add("searcher", f"the {out['name']} searcher requires max_time and time_metric to be set",
                     "give time_metric and max_time (Determined 0.38), or max_length (the promotion-based search "
                     "of 0.37 and before)")


_METHOD_RULES: Dict[str, List[Callable[[Dict[str, Any], Problems], None]]] = {
    "adaptive": [_budget_exceeds_max_length],
    "sync_halving": [_budget_exceeds_max_length],
    "adaptive_asha": [_time_or_length],
    "async_halving": [_time_or_length],
}


class SearcherSpec(Spec):
    allowed = "a mapping with name (one of " + ", ".join(SEARCHER_NAMES) + f"), metric and the method's fields, {_EXAMPLE}"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        name_path = join_path(path, "name")
        name = value.get("name")
        if name is None:
            problems.missing(name_path, "one of " + ", ".join(SEARCHER_NAMES))
            return INVALID
        if Enum(*SEARCHER_NAMES).check(name, name_path, problems) is INVALID:
            return INVALID
        section = Section(
            {**_COMMON, **METHOD_FIELDS[name]}, extra_keys=("name",), unknown_what=f"field for the {name} searcher"
        )
        checked = section.check(value, path, problems)
        out = {"name": name, **checked}
        for rule in _METHOD_RULES.get(name, []):
            rule(out, problems)
        return out


def searcher_lengths(searcher: Mapping[str, Any]) -> Dict[str, Any]:
    """The length fields of a canonical searcher (max_length, budget, length_per_round) that it has."""
    return {k: searcher[k] for k in LENGTH_FIELDS if isinstance(searcher.get(k), Mapping)}


def searcher_drives_trials(searcher: Mapping[str, Any]) -> bool:
    """Whether the search method tells each trial how long to train (searcher operations: Determined 0.37 and
    before), rather than each trial running its own loop until its process exits (Determined 0.38).

    0.38 semantics apply to single, random and grid without `max_length`, and to adaptive_asha / async_halving with
    `time_metric` and `max_time` (which stop trials by the time metric they report).
    """
    name = searcher.get("name")
    if name in ("single", "random", "grid"):
        return searcher.get("max_length") is not None
    if name in ("adaptive_asha", "async_halving"):
        return not (searcher.get("time_metric") and searcher.get("max_time"))
    return True
