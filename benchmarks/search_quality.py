"""Search quality at equal budget: our random search and adaptive_asha (through the searcher simulator) against
Optuna's TPE sampler with its SuccessiveHalving and Hyperband pruners, on two problems.

Every method gets the same total budget B of fidelity units per run (B = ``--budget`` full-length trials x the
problem's max_length) and the same search space. A unit counts when a trial really trains it: a promoted trial
(ours) or a continued trial (Optuna's) pays only the units beyond what it already trained. A run stops at the
first evaluation that would go past B. We report, over ``--seeds`` seeds, the mean and std of the best metric
seen once 25%, 50% and 100% of B were spent, and a verdict per problem.

* random: ``RandomSearch`` with max_trials = B // max_length, each trial at max_length.
* asha: ``adaptive_asha`` with its defaults (standard mode, divisor 4, max_rungs 5) and the smallest
  max_trials whose simulated spend reaches B (found with a metric-free stand-in objective), cut at B.
* optuna-sha / optuna-hyperband: ``TPESampler(seed)`` with ``SuccessiveHalvingPruner`` or ``HyperbandPruner``
  (min_resource = the smallest ASHA rung, reduction factor = the ASHA divisor); each trial trains incrementally,
  reports at ASHA's rung lengths and stops when pruned.

``--methods`` adds diagnostics that change one thing at a time (see DIAGNOSTIC_METHODS). Results and what they
show: benchmarks/README.md.

Run: ``.venv/bin/python benchmarks/search_quality.py [--quick] [--seeds N] [--budget FULL_TRIALS] [--methods ...]``.
"""
import argparse
import dataclasses
import math
import pathlib
import random
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _search_problems import (  # noqa: E402
    DIGITS_BATCH_SIZE,
    Objective,
    SearchProblem,
    digits_mlp_problem,
    hartmann_problem,
    suggest_hparams,
)

FRACTIONS = (0.25, 0.5, 1.0)
METHODS = ("random", "asha", "optuna-sha", "optuna-hyperband")
# Diagnostics, run with --methods: each changes one thing of a main method to explain a gap between them.
DIAGNOSTIC_METHODS = (
    "asha-aggressive",  # adaptive_asha with mode aggressive: one bracket, as Optuna's SuccessiveHalvingPruner
    "optuna-random-sha",  # Optuna's RandomSampler + SuccessiveHalvingPruner: ASHA's sampling, Optuna's pruning
    "optuna-random-hyperband",  # Optuna's RandomSampler + HyperbandPruner
    "optuna-tpe",  # Optuna's TPESampler with no pruner: every trial at max_length (TPE without low fidelities)
)
OPTUNA_METHODS = ("optuna-sha", "optuna-hyperband", "optuna-random-sha", "optuna-random-hyperband", "optuna-tpe")
DIVISOR = 4  # adaptive_asha's default divisor, also the Optuna pruners' reduction factor
MAX_RUNGS = 5  # adaptive_asha's default
WORKERS = 1  # slots of the simulated cluster: one trial trains at a time, as in Optuna's sequential loop


class BudgetExhausted(Exception):
    """The next evaluation would train past the budget: the run is over."""


class BudgetMeter:
    """Wraps an objective: counts the fidelity units each trial really trains, refuses any evaluation that would
    go past `budget` (and every one after it), and records (units spent so far, metric) after each evaluation."""

    def __init__(self, objective: Objective, budget: int) -> None:
        self.objective = objective
        self.budget = budget
        self.trained: Dict[str, int] = {}
        self.spent = 0
        self.exhausted = False
        self.trace: List[Tuple[int, float]] = []
        self.max_lengths: Dict[str, int] = {}

    def __call__(self, key: str, hparams: Dict[str, Any], length: int, parent: Optional[str] = None) -> float:
        extra = max(0, length - self.trained.get(key, 0))
        if self.exhausted or self.spent + extra > self.budget:
            self.exhausted = True
            raise BudgetExhausted(f"{key} needs {extra} more units; {self.budget - self.spent} of {self.budget} left")
        metric = self.objective(key, hparams, length, parent)
        self.spent += extra
        self.trained[key] = max(length, self.trained.get(key, 0))
        self.trace.append((self.spent, float(metric)))
        return float(metric)


@dataclasses.dataclass
class RunResult:
    """One method on one problem with one seed."""

    best_at: Dict[float, float]  # fraction of B -> best metric seen once that much was spent (nan: none yet)
    trials: int
    full_length_trials: int
    spent: int
    seconds: float


def summarise(meter: BudgetMeter, max_length: int, seconds: float) -> RunResult:
    best_at = {}
    for fraction in FRACTIONS:
        seen = [metric for spent, metric in meter.trace if spent <= fraction * meter.budget]
        best_at[fraction] = min(seen) if seen else math.nan
    return RunResult(
        best_at=best_at,
        trials=len(meter.trained),
        full_length_trials=sum(1 for length in meter.trained.values() if length >= max_length),
        spent=meter.spent,
        seconds=seconds,
    )


# -- our search methods, through the searcher simulator ---------------------------------------------------


def experiment_config(problem: SearchProblem, searcher: Dict[str, Any]) -> Dict[str, Any]:
    """The canonical experiment config of `problem` searched by `searcher` (name and method fields)."""
    from determined.config import load_experiment_config

    batch_size = DIGITS_BATCH_SIZE if problem.unit == "epochs" else 1
    return load_experiment_config(
        {
            "entrypoint": "model_def:Trial",
            "hyperparameters": {"global_batch_size": batch_size, **problem.hparams},
            "records_per_epoch": 1437 if problem.unit == "epochs" else 0,
            "searcher": {"metric": "metric", "smaller_is_better": True, "max_length": {problem.unit: problem.max_length}, **searcher},
        }
    )


def asha_searcher(max_trials: int, mode: str = "standard") -> Dict[str, Any]:
    return {"name": "adaptive_asha", "max_trials": max_trials, "mode": mode, "divisor": DIVISOR, "max_rungs": MAX_RUNGS}


def simulate_method(problem: SearchProblem, searcher: Dict[str, Any], objective: Objective, seed: int) -> None:
    """Play the master for the search method `searcher` describes, until it shuts down or the objective stops it."""
    from determined.searcher import make_search_method
    from determined.searcher import simulate

    config = experiment_config(problem, searcher)
    simulate(make_search_method(config["searcher"]), config["hyperparameters"], objective, seed=seed, max_concurrent=WORKERS)


def asha_spend(problem: SearchProblem, max_trials: int, mode: str, seed: int) -> int:
    """Units adaptive_asha with `max_trials` trains in all, with a stand-in objective (a random metric per trial)."""
    meter = BudgetMeter(lambda key, hp, length, parent: random.Random(f"{seed}/{key}").random(), budget=sys.maxsize)
    simulate_method(problem, asha_searcher(max_trials, mode), meter, seed)
    return meter.spent


def calibrate_asha_trials(problem: SearchProblem, budget: int, mode: str = "standard", seed: int = 0) -> int:
    """The smallest max_trials whose total ASHA spend reaches `budget` (the spend grows with max_trials)."""
    high = 1
    while asha_spend(problem, high, mode, seed) < budget:
        high *= 2
        if high > 1_000_000:
            raise ValueError(f"adaptive_asha does not spend {budget} units with up to a million trials")
    low = high // 2  # spend(low) < budget, or low == 0
    while high - low > 1:
        middle = (low + high) // 2
        if asha_spend(problem, middle, mode, seed) >= budget:
            high = middle
        else:
            low = middle
    return high


def asha_rung_lengths(problem: SearchProblem, max_trials: int) -> List[int]:
    """The distinct rung lengths of all adaptive_asha brackets, shortest first (Optuna reports at these)."""
    from determined.searcher import make_search_method

    method: Any = make_search_method(experiment_config(problem, asha_searcher(max_trials))["searcher"])
    return sorted({length for bracket in method.describe()["brackets"] for length in bracket["rung_lengths"]})


def run_ours(problem: SearchProblem, method: str, budget: int, seed: int, asha_trials: Dict[str, int]) -> RunResult:
    """`random`, `asha` or `asha-aggressive` through the simulator; `asha_trials`: max_trials by ASHA mode."""
    meter = BudgetMeter(problem.make_objective(seed), budget)
    if method == "random":
        searcher = {"name": "random", "max_trials": max(1, budget // problem.max_length)}
    else:
        mode = "aggressive" if method == "asha-aggressive" else "standard"
        searcher = asha_searcher(asha_trials[mode], mode)
    start = time.perf_counter()
    try:
        simulate_method(problem, searcher, meter, seed)
    except BudgetExhausted:
        pass
    return summarise(meter, problem.max_length, time.perf_counter() - start)


# -- Optuna: TPE + a pruner, driving its own loop ---------------------------------------------------------


def run_optuna(problem: SearchProblem, method: str, budget: int, seed: int, rung_lengths: Sequence[int]) -> RunResult:
    """One of OPTUNA_METHODS: an ask-and-tell loop that trains each trial rung by rung until pruned or done."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if method == "optuna-tpe":
        pruner: Any = optuna.pruners.NopPruner()
        rung_lengths = [problem.max_length]
    elif method.endswith("-sha"):
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=rung_lengths[0], reduction_factor=DIVISOR)
    else:
        pruner = optuna.pruners.HyperbandPruner(
            min_resource=rung_lengths[0], max_resource=problem.max_length, reduction_factor=DIVISOR
        )
    if method.startswith("optuna-random-"):
        sampler: Any = optuna.samplers.RandomSampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=seed)
    # A fixed study name: HyperbandPruner assigns brackets by a hash of the name and trial number, and the default
    # name is a random UUID, which would make runs with the same seed differ.
    study = optuna.create_study(study_name=f"{method}-seed{seed}", direction="minimize", sampler=sampler, pruner=pruner)
    meter = BudgetMeter(problem.make_objective(seed), budget)
    start = time.perf_counter()
    try:
        while True:
            trial = study.ask()
            hparams = suggest_hparams(trial, problem.hparams)
            key = f"optuna-{trial.number}"
            metric = math.nan
            pruned = False
            for length in rung_lengths:
                metric = meter(key, hparams, length)
                if length >= problem.max_length:
                    break
                trial.report(metric, length)
                if trial.should_prune():
                    pruned = True
                    break
            if pruned:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                study.tell(trial, metric)
    except BudgetExhausted:
        pass
    return summarise(meter, problem.max_length, time.perf_counter() - start)


# -- the table --------------------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return math.nan, math.nan
    return statistics.fmean(finite), (statistics.stdev(finite) if len(finite) > 1 else 0.0)


def fmt(values: Sequence[float], digits: int) -> str:
    mean, std = mean_std(values)
    if math.isnan(mean):
        return "-"
    missing = sum(1 for v in values if math.isnan(v))
    return f"{mean:.{digits}f} ± {std:.{digits}f}" + (f" ({missing} none)" if missing else "")


def verdict(results: Dict[str, List[RunResult]], digits: int) -> str:
    """ASHA against the better (by mean at 100% of B) of the TPE methods that ran, with the noise of the means."""
    candidates = [m for m in ("optuna-sha", "optuna-hyperband") if m in results]
    if "asha" not in results or not candidates:
        return "ASHA vs best Optuna: not run (--methods needs asha and optuna-sha or optuna-hyperband)"
    asha = [r.best_at[1.0] for r in results["asha"]]
    name = min(candidates, key=lambda m: mean_std([r.best_at[1.0] for r in results[m]])[0])
    other = [r.best_at[1.0] for r in results[name]]
    (ma, sa), (mo, so) = mean_std(asha), mean_std(other)
    n = len(asha)
    standard_error = math.sqrt(sa**2 / n + so**2 / n)
    diff = ma - mo
    if abs(diff) <= 2 * standard_error:
        outcome = "a tie within noise (|difference| <= 2 standard errors)"
    elif diff < 0:
        outcome = "ASHA is better"
    else:
        outcome = "ASHA is worse"
    return (
        f"ASHA vs best Optuna ({name}): {ma:.{digits}f} vs {mo:.{digits}f} at 100% of B "
        f"(difference {diff:+.{digits}f}, standard error {standard_error:.{digits}f}, {n} seeds): {outcome}"
    )


def print_problem(problem: SearchProblem, budget: int, asha_trials: Dict[str, int], rung_lengths: List[int],
                  results: Dict[str, List[RunResult]], digits: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    trials = ", ".join(f"{mode} {n}" for mode, n in asha_trials.items())
    table = Table(
        title=f"{problem.name}: B = {budget} {problem.unit} ({budget // problem.max_length} full trials), "
        f"rungs {rung_lengths}, ASHA max_trials: {trials}",
        caption=problem.description,
    )
    table.add_column("method")
    for fraction in FRACTIONS:
        table.add_column(f"best @ {int(fraction * 100)}% B", justify="right")
    table.add_column("trials", justify="right")
    table.add_column("at max_length", justify="right")
    table.add_column("spent / B", justify="right")
    table.add_column("s / run", justify="right")
    for method, runs in results.items():
        table.add_row(
            method,
            *[fmt([r.best_at[f] for r in runs], digits) for f in FRACTIONS],
            f"{statistics.fmean(r.trials for r in runs):.1f}",
            f"{statistics.fmean(r.full_length_trials for r in runs):.1f}",
            f"{statistics.fmean(r.spent for r in runs) / budget:.1%}",
            f"{statistics.fmean(r.seconds for r in runs):.2f}",
        )
    console.print(table)
    console.print(verdict(results, digits))
    console.print()


def run_problem(problem: SearchProblem, methods: Sequence[str], full_trials: int, seeds: int, digits: int,
                progress: Callable[[str], None]) -> Dict[str, List[RunResult]]:
    """Every method in `methods` on `problem` with seeds 0..seeds-1 at a budget of `full_trials` full trials."""
    budget = full_trials * problem.max_length
    modes = ["standard"] + (["aggressive"] if "asha-aggressive" in methods else [])
    asha_trials = {mode: calibrate_asha_trials(problem, budget, mode) for mode in modes}
    rung_lengths = asha_rung_lengths(problem, asha_trials["standard"])
    results: Dict[str, List[RunResult]] = {method: [] for method in methods}
    for seed in range(seeds):
        for method in methods:
            progress(f"{problem.name}: seed {seed}, {method}")
            if method in OPTUNA_METHODS:
                results[method].append(run_optuna(problem, method, budget, seed, rung_lengths))
            else:
                results[method].append(run_ours(problem, method, budget, seed, asha_trials))
    print_problem(problem, budget, asha_trials, rung_lengths, results, digits)
    return results


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 seeds, a budget of 6 full trials")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per method (default 5; 2 with --quick)")
    parser.add_argument("--budget", type=int, default=None,
                        help="total budget per run, in full-length trials (B = budget x max_length; default 32; 6 with --quick)")
    parser.add_argument("--hartmann", default="mfh6_good", help="the mf-prior-bench Hartmann benchmark (default mfh6_good)")
    parser.add_argument("--epochs", type=int, default=16, help="max_length of the digits MLP in epochs (default 16)")
    parser.add_argument("--problems", default="hartmann,digits-mlp", help="comma-separated subset of hartmann,digits-mlp")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated methods (default {','.join(METHODS)}); diagnostics: {','.join(DIAGNOSTIC_METHODS)}")
    args = parser.parse_args(argv)
    args.seeds = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    args.budget = args.budget if args.budget is not None else (6 if args.quick else 32)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.budget < 1:
        parser.error(f"--budget must be >= 1 full trial, got {args.budget}")
    args.problems = _choices(parser, "--problems", args.problems, ("hartmann", "digits-mlp"))
    args.methods = _choices(parser, "--methods", args.methods, METHODS + DIAGNOSTIC_METHODS)
    return args


def _choices(parser: argparse.ArgumentParser, flag: str, value: str, allowed: Sequence[str]) -> List[str]:
    chosen = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in chosen if item not in allowed]
    if unknown or not chosen:
        parser.error(f"{flag}: unknown {unknown or 'empty list'}; use a comma-separated subset of {','.join(allowed)}")
    return list(dict.fromkeys(chosen))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    try:
        problems = [hartmann_problem(args.hartmann)] if "hartmann" in args.problems else []
        problems += [digits_mlp_problem(args.epochs)] if "digits-mlp" in args.problems else []
    except ValueError as exc:
        print(f"search_quality.py: error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        run_problem(problem, args.methods, args.budget, args.seeds, 4, progress)
    print(f"total {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
