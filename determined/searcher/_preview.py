"""What a search will do, computed from the config alone: brackets, rungs, trials and lengths (no training)."""
import copy
from typing import Any, Callable, Dict, List, Mapping, Optional

from determined.searcher._asha import ASHASearch, AsyncHalvingSearch, equal_metrics_length
from determined.searcher._asha_stopping import ASHAStoppingSearch
from determined.searcher._context import MAX_TRIALS
from determined.searcher._custom import CustomSearch
from determined.searcher._grid import GridSearch, grid_axes
from determined.searcher._method import SearchMethod
from determined.searcher._searcher import make_search_method
from determined.searcher._simulate import Objective, SimulationResult, simulate

# Past this many trials, preview does not simulate (the worst case is then left out rather than slow).
SIMULATION_TRIAL_LIMIT = 5000


def planned_trials(config: Mapping[str, Any]) -> int:
    """How many trials the search of a canonical config creates in all, from the config alone (no simulation)."""
    method = make_search_method(config["searcher"])
    if isinstance(method, CustomSearch):
        return 0  # its search runner decides (and the master bounds it, MAX_TRIALS)
    if isinstance(method, GridSearch):
        trials = 1
        for values in grid_axes(config.get("hyperparameters") or {}).values():
            trials *= len(values)
        return trials
    if hasattr(method, "max_trials"):  # random, single, adaptive_asha, async_halving
        return int(getattr(method, "max_trials"))
    described = getattr(method, "describe")()
    return int(described["trials"])


def check_trial_count(config: Mapping[str, Any]) -> None:
    """Raise ValueError naming the limit, its reason and the fix when the search would create too many trials."""
    trials = planned_trials(config)
    if trials > MAX_TRIALS:
        name = config["searcher"].get("name")
        fields = {"pbt": "population_size or num_rounds", "grid": "the count of some hyperparameters",
                  "adaptive": "budget", "sync_halving": "budget"}.get(str(name), "max_trials")
        raise ValueError(
            f"searcher: this {name} search would create {trials} trials, more than the {MAX_TRIALS} one experiment "
            f"may have (each trial is a database row with its metrics and logs, and the search's state, stored at "
            f"every event, holds every trial); lower {fields}, or split the search into several experiments")


def preview(config: Mapping[str, Any]) -> Dict[str, Any]:
    """Describe the search of a canonical experiment config as plain JSON, without running anything.

    Always: `searcher`, `metric`, `smaller_is_better`, `unit`, `trials` (how many trials will be created),
    `total_length` (units all trials train together when every trial is equally good). Per method: `max_length`;
    `brackets` (each with `rungs`, `trials`, `rung_lengths` and, for asha/async_halving, `concurrency`);
    `total_length_worst` for asha/async_halving (every new trial better than all before: the most promotions);
    grid `values`; pbt `population_size`, `num_rounds`, `length_per_round`.
    """
    searcher_config = config["searcher"]
    name = searcher_config["name"]
    hparams = config.get("hyperparameters") or {}
    seed = int((config.get("reproducibility") or {}).get("experiment_seed") or 0)
    method = make_search_method(searcher_config)
    out: Dict[str, Any] = {
        "searcher": name,
        "metric": searcher_config.get("metric"),
        "smaller_is_better": bool(searcher_config.get("smaller_is_better", True)),
        "unit": method.unit,
        "max_concurrent_trials": int(searcher_config.get("max_concurrent_trials") or 0),
    }
    if name in ("single", "random"):
        trials = int(getattr(method, "max_trials"))
        length = getattr(method, "max_length")
        out.update(max_length=length, trials=trials, total_length=trials * length if length else None)
    elif isinstance(method, GridSearch):
        axes = grid_axes(hparams)
        trials = 1
        for values in axes.values():
            trials *= len(values)
        length = method.max_length
        out.update(max_length=length, trials=trials, total_length=trials * length if length else None,
                   values={k: list(v) for k, v in axes.items()})
    elif isinstance(method, ASHAStoppingSearch):
        # 0.38: trials run their own loops; the search only stops them at rungs of the reported time metric.
        out.update(method.describe(), trials=method.max_trials, max_time=method.max_time,
                   time_metric=method.time_metric, total_length=None)
    elif isinstance(method, (ASHASearch, AsyncHalvingSearch)):
        out.update(_halving_preview(method, hparams, seed))
    elif isinstance(method, CustomSearch):
        out.update(method.describe())
    else:
        out.update(_described_or_simulated(method, hparams, seed))
    return out


def _halving_preview(method: SearchMethod, hparams: Mapping[str, Any], seed: int) -> Dict[str, Any]:
    if isinstance(method, ASHASearch):
        brackets = [b.describe() for b in method.brackets]
        out: Dict[str, Any] = {"max_rungs": method.max_rungs}
    else:
        assert isinstance(method, AsyncHalvingSearch)
        brackets = [method.describe()]
        out = {"max_rungs": method.num_rungs}
    divisor = float(getattr(method, "divisor"))
    trials = sum(b["trials"] for b in brackets)
    out.update(max_length=int(getattr(method, "max_length")), trials=trials, brackets=brackets,
               total_length=sum(equal_metrics_length(b["trials"], b["rung_lengths"], divisor) for b in brackets))
    out["total_length_worst"] = None
    if trials <= SIMULATION_TRIAL_LIMIT:
        fresh = copy.deepcopy(method)
        out["total_length_worst"] = _simulate(fresh, hparams, seed, _each_new_trial_best(method)).total_length
    return out


def _each_new_trial_best(method: SearchMethod) -> Objective:
    """An objective where every trial is better than all trials created before it."""
    order: Dict[str, int] = {}
    sign = -1.0 if getattr(method, "smaller_is_better", True) else 1.0

    def objective(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
        return sign * order.setdefault(request_id, len(order))

    return objective


def _constant(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
    return 0.0


def _simulate(method: SearchMethod, hparams: Mapping[str, Any], seed: int, objective: Objective) -> SimulationResult:
    return simulate(method, hparams, objective, seed=seed)


def _described_or_simulated(method: SearchMethod, hparams: Mapping[str, Any], seed: int) -> Dict[str, Any]:
    """adaptive, adaptive_simple, sync_halving, pbt: the method's own describe(); what it lacks is counted by simulating
    every trial reporting the same metric."""
    out: Dict[str, Any] = {}
    describe: Optional[Callable[[], Dict[str, Any]]] = getattr(method, "describe", None)
    if describe is not None:
        out.update({k: v for k, v in describe().items() if k not in ("name", "unit")})
    if "max_length" not in out and hasattr(method, "max_length"):
        out["max_length"] = int(getattr(method, "max_length"))
    if "total_length" not in out or ("brackets" not in out and "population_size" not in out):
        result = _simulate(method, hparams, seed, _constant)
        out.setdefault("trials", len(result.trials))
        out.setdefault("total_length", result.total_length)
        if "brackets" not in out and "population_size" not in out:
            out["validations_by_length"] = _validations_by_length(result)
    return out


def _validations_by_length(result: SimulationResult) -> List[Dict[str, int]]:
    counts: Dict[int, int] = {}
    for trial in result.trials.values():
        for length, _ in trial.validations:
            counts[length] = counts.get(length, 0) + 1
    return [{"length": length, "trials": counts[length]} for length in sorted(counts)]


# ---------------------------------------------------------------- text


def format_preview(data: Mapping[str, Any]) -> str:
    """A readable text form of `preview()`: a summary, then a table of brackets (or grid values) if any."""
    unit = data["unit"]
    direction = "smaller is better" if data.get("smaller_is_better", True) else "larger is better"
    lines = [f"Searcher: {data['searcher']} (metric {data.get('metric')}, {direction}); lengths in {unit}"]
    facts = []
    if data.get("max_length") is not None:
        facts.append(f"max_length {data['max_length']} {unit}")
    if data.get("trials") is not None:
        facts.append(f"{data['trials']} trial{'' if data['trials'] == 1 else 's'}")
    if data.get("max_concurrent_trials"):
        facts.append(f"at most {data['max_concurrent_trials']} at once")
    if data.get("max_rungs") is not None:
        facts.append(f"{data['max_rungs']} rungs at most")
    if facts:
        lines.append(", ".join(facts))
    if "population_size" in data:
        lines.append(
            f"population {data['population_size']}, {data['num_rounds']} rounds of {data['length_per_round']} {unit}, "
            f"{data['replaced_per_round']} members replaced per round"
        )
    if data.get("brackets"):
        lines.append("")
        lines += _table(_bracket_rows(data["brackets"], unit))
    if data.get("values"):
        lines.append("")
        rows = [["hyperparameter", "count", "values"]]
        rows += [[name, str(len(vals)), ", ".join(_short(v) for v in vals)] for name, vals in data["values"].items()]
        lines += _table(rows)
    if data.get("validations_by_length"):
        lines.append("")
        rows = [[f"length ({unit})", "trials validated"]]
        rows += [[str(r["length"]), str(r["trials"])] for r in data["validations_by_length"]]
        lines += _table(rows)
    lines.append("")
    if data.get("total_length") is None:
        if data.get("note"):
            note = str(data["note"])
            lines.append(note[:1].upper() + note[1:])
        elif data.get("time_metric"):
            lines.append(f"Each trial runs its own loop and reports {data['time_metric']} with its validation "
                         f"metrics; trials below a rung's cutoff are stopped, the best reach max_time "
                         f"{data['max_time']}")
        else:
            lines.append("No max_length: each trial runs its own loop until its process exits")
        return "\n".join(lines)
    total = f"Total training: {data['total_length']} {unit}"
    if data.get("brackets") or data.get("validations_by_length"):
        total += " when every trial is equally good"
    if data.get("total_length_worst") is not None:
        total += f"; at most {data['total_length_worst']} {unit} when every new trial beats all before it"
    lines.append(total)
    return "\n".join(lines)


def _bracket_rows(brackets: List[Mapping[str, Any]], unit: str) -> List[List[str]]:
    keys: List[str] = []
    for bracket in brackets:
        keys += [k for k in bracket if k not in keys]
    header = ["bracket"] + [f"rung lengths ({unit})" if k == "rung_lengths" else k.replace("_", " ") for k in keys]
    rows = [header]
    for i, bracket in enumerate(brackets, 1):
        rows.append([str(i)] + [_short(bracket.get(k, "")) for k in keys])
    return rows


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ", ".join(_short(v) for v in value)
    return str(value)


def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
