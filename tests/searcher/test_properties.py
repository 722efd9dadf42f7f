"""Properties of every search method over random configs and objectives, checked by simulation."""
import itertools
import random
from typing import Any, Dict, List, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from determined import config as det_config
from determined import searcher
from determined.searcher import ASHASearch, ExitedReason, SearchContext, simulate
from determined.searcher._asha import WORST_METRIC, promotion_count
from determined.searcher._grid import grid_axes
from determined.searcher._ops import Operation

SETTINGS = settings(max_examples=50, deadline=None)

HPARAM_SPECS = st.sampled_from([
    {"type": "int", "minval": 1, "maxval": 9, "count": 3},
    {"type": "double", "minval": -1.0, "maxval": 1.0, "count": 2},
    {"type": "log", "base": 10, "minval": -3, "maxval": -1, "count": 3},
    {"type": "categorical", "vals": ["a", "b", "c"]},
    {"type": "const", "val": 7},
])
HPARAMS = st.dictionaries(st.sampled_from(["alpha", "beta", "gamma", "delta"]), HPARAM_SPECS, min_size=1, max_size=3)
DIVISORS = st.sampled_from([2, 3, 4, 2.5])


@st.composite
def asha_configs(draw: Any) -> Dict[str, Any]:
    cfg: Dict[str, Any] = {
        "name": "adaptive_asha",
        "max_length": {"batches": draw(st.integers(1, 300))},
        "max_trials": draw(st.integers(1, 30)),
        "divisor": draw(DIVISORS),
        "mode": draw(st.sampled_from(["standard", "aggressive", "conservative"])),
        "max_rungs": draw(st.integers(1, 5)),
        "max_concurrent_trials": draw(st.integers(0, 6)),
    }
    return cfg


@st.composite
def any_configs(draw: Any) -> Dict[str, Any]:
    kind = draw(st.sampled_from(["grid", "random", "adaptive_asha", "adaptive", "adaptive_simple", "pbt"]))
    length = draw(st.integers(1, 200))
    if kind == "grid":
        return {"name": "grid", "max_length": {"batches": length}}
    if kind == "random":
        return {"name": "random", "max_length": {"batches": length}, "max_trials": draw(st.integers(1, 12))}
    if kind == "adaptive_asha":
        return draw(asha_configs())
    if kind == "adaptive":
        return {"name": "adaptive", "max_length": {"batches": length}, "divisor": draw(DIVISORS),
                "budget": {"batches": length * draw(st.integers(2, 15))},
                "mode": draw(st.sampled_from(["standard", "aggressive", "conservative"]))}
    if kind == "adaptive_simple":
        return {"name": "adaptive_simple", "max_length": {"batches": length}, "divisor": draw(DIVISORS),
                "max_trials": draw(st.integers(1, 30)),
                "mode": draw(st.sampled_from(["standard", "aggressive", "conservative"]))}
    return {"name": "pbt", "population_size": draw(st.integers(1, 8)), "num_rounds": draw(st.integers(1, 4)),
            "length_per_round": {"batches": draw(st.integers(1, 50))},
            "replace_function": {"truncate_fraction": draw(st.sampled_from([0.0, 0.25, 0.5]))},
            "explore_function": {"resample_probability": draw(st.sampled_from([0.0, 0.3, 1.0])),
                                 "perturb_factor": draw(st.sampled_from([0.0, 0.2]))}}


def canonical(searcher_config: Dict[str, Any], hparams: Dict[str, Any], smaller: bool) -> Dict[str, Any]:
    raw = {"entrypoint": "m:T", "hyperparameters": {"global_batch_size": 8, **hparams},
           "searcher": {"metric": "loss", "smaller_is_better": smaller, **searcher_config}}
    return det_config.load_experiment_config(raw)


def objective_for(seed: int) -> Any:
    """A deterministic objective: a noisy function of the hparams and the length."""
    def objective(request_id: str, hparams: Dict[str, Any], length: int, parent: Optional[str]) -> float:
        rng = random.Random(f"{seed}:{request_id}:{length}")
        base = sum(hash(str(v)) % 97 for v in hparams.values()) / 97.0
        return base / (1 + length) + rng.random() * 0.1
    return objective


def exits_for(seed: int, rate: float) -> Any:
    def exit_early(request_id: str, hparams: Dict[str, Any], length: int) -> Optional[ExitedReason]:
        return ExitedReason.ERRORED if random.Random(f"exit:{seed}:{request_id}:{length}").random() < rate else None
    return exit_early


def max_allowed_length(cfg: Dict[str, Any]) -> int:
    s = cfg["searcher"]
    if s["name"] == "pbt":
        return s["num_rounds"] * s["length_per_round"]["batches"]
    return s["max_length"]["batches"]


def summary(result: searcher.SimulationResult) -> List[Any]:
    return [(t.request_id, t.hparams, t.parent, t.start_length, t.validations, t.length, t.closed, t.exited)
            for t in result.trials.values()] + [result.total_length, result.events, result.shutdown, result.failure]


@SETTINGS
@given(any_configs(), HPARAMS, st.booleans(), st.integers(0, 2**16), st.sampled_from([0, 1, 3]),
       st.sampled_from([0.0, 0.1]))
def test_every_method_shuts_down_within_max_length_and_restores_identically(
    searcher_config: Dict[str, Any], hparams: Dict[str, Any], smaller: bool, seed: int, concurrent: int, exit_rate: float
) -> None:
    cfg = canonical(searcher_config, hparams, smaller)

    def run(snapshots: bool) -> searcher.SimulationResult:
        method = searcher.make_search_method(cfg["searcher"])
        return simulate(method, cfg["hyperparameters"], objective_for(seed), seed=seed, max_concurrent=concurrent,
                        exit_early=exits_for(seed, exit_rate) if exit_rate else None, snapshot_every_event=snapshots)

    result = run(False)
    assert result.shutdown
    assert all(t.closed for t in result.trials.values())
    assert all(t.length <= max_allowed_length(cfg) for t in result.trials.values())
    assert all(length <= max_allowed_length(cfg) for t in result.trials.values() for length, _ in t.validations)
    assert summary(run(True)) == summary(result)  # snapshot -> JSON -> fresh instance at every event
    assert summary(run(False)) == summary(result)  # the same seed gives the same trials, hparams and metrics


@SETTINGS
@given(HPARAMS, st.integers(1, 50), st.integers(0, 2**16))
def test_grid_covers_the_product_exactly_once(hparams: Dict[str, Any], length: int, seed: int) -> None:
    cfg = canonical({"name": "grid", "max_length": {"batches": length}}, hparams, True)
    result = simulate(searcher.make_search_method(cfg["searcher"]), cfg["hyperparameters"], objective_for(seed),
                      seed=seed, max_concurrent=2)
    axes = grid_axes(cfg["hyperparameters"])
    expected = sorted(repr(dict(zip(axes, combo))) for combo in itertools.product(*axes.values()))
    got = sorted(repr({k: t.hparams[k] for k in axes}) for t in result.trials.values())
    assert got == expected
    assert all(t.validations and t.validations[-1][0] == length for t in result.trials.values())


class CheckedASHA(ASHASearch):
    """ASHA that checks, at every event, that every newly promoted trial is in the top floor(m/divisor) of its
    rung, ranking by the RAW metrics it was given (independently of the method's own sorted lists)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raw: Dict[str, Dict[int, float]] = {}  # request id -> rung -> metric in "smaller is better" form
        self.promotions = 0

    def _check(self, call: Any) -> List[Operation]:
        before = {(i, r, e[0]) for i, b in enumerate(self.brackets) for r, rung in enumerate(b.rungs) for e in rung if e[2]}
        ops = call()
        for i, bracket in enumerate(self.brackets):
            for r, rung in enumerate(bracket.rungs):
                for request_id, _, promoted in rung:
                    if not promoted or (i, r, request_id) in before:
                        continue
                    self.promotions += 1
                    mine = self.raw[request_id][r]
                    better = sum(1 for other, _, _ in rung if self.raw[other][r] < mine)
                    assert better < promotion_count(len(rung), self.divisor), (request_id, r, len(rung))
        return ops

    def _record(self, request_id: str, value: float) -> None:
        bracket = self.brackets[self.owner[request_id]]
        self.raw.setdefault(request_id, {})[bracket.trial_rung[request_id]] = value

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        self._record(request_id, metric if self.smaller_is_better else -metric)

        def call() -> List[Operation]:
            ops = super(CheckedASHA, self).on_validation_completed(ctx, request_id, metric, length)
            self._record_worst_for_exited()
            return ops
        return self._check(call)

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        bracket = self.brackets[self.owner[request_id]]
        if request_id in bracket.outstanding:
            self._record(request_id, WORST_METRIC)

        def call() -> List[Operation]:
            ops = super(CheckedASHA, self).on_trial_exited_early(ctx, request_id, reason)
            self._record_worst_for_exited()
            return ops
        return self._check(call)

    def _record_worst_for_exited(self) -> None:
        # an exited trial that was promoted reports the worst metric in the next rung at once
        for bracket in self.brackets:
            for r, rung in enumerate(bracket.rungs):
                for request_id, value, _ in rung:
                    if value == WORST_METRIC:
                        self.raw.setdefault(request_id, {})[r] = WORST_METRIC


@SETTINGS
@given(asha_configs(), st.booleans(), st.integers(0, 2**16), st.sampled_from([0, 2]), st.sampled_from([0.0, 0.15]))
def test_asha_promotes_only_the_top_of_a_rung(
    searcher_config: Dict[str, Any], smaller: bool, seed: int, concurrent: int, exit_rate: float
) -> None:
    cfg = canonical(searcher_config, {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}, smaller)
    s = cfg["searcher"]
    method = CheckedASHA(
        max_length=s["max_length"]["batches"], max_trials=s["max_trials"], mode=s["mode"], divisor=s["divisor"],
        max_rungs=s["max_rungs"], max_concurrent_trials=s["max_concurrent_trials"], smaller_is_better=smaller,
    )
    result = simulate(method, cfg["hyperparameters"], objective_for(seed), seed=seed, max_concurrent=concurrent,
                      exit_early=exits_for(seed, exit_rate) if exit_rate else None)
    assert result.shutdown and len(result.trials) == s["max_trials"]
    assert all(len(t.validations) <= max(method.bracket_rungs) for t in result.trials.values())


@SETTINGS
@given(st.booleans(), st.integers(0, 2**16))
def test_asha_direction_follows_smaller_is_better(smaller: bool, seed: int) -> None:
    """With a metric equal to x, the trial promoted first out of rung 0 has the best x for that direction."""
    cfg = canonical({"name": "adaptive_asha", "max_length": {"batches": 16}, "max_trials": 8, "divisor": 2,
                     "mode": "aggressive", "max_concurrent_trials": 8},
                    {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}}, smaller)
    method = searcher.make_search_method(cfg["searcher"])
    result = simulate(method, cfg["hyperparameters"], lambda rid, hp, length, parent: hp["x"], seed=seed)
    xs = {rid: t.hparams["x"] for rid, t in result.trials.items()}
    finalists = [rid for rid, t in result.trials.items() if t.length == 16]
    best = min(xs, key=xs.__getitem__) if smaller else max(xs, key=xs.__getitem__)
    assert best in finalists  # every trial starts at once: the best x always climbs to the top
    assert result.best(smaller)[1] == best
