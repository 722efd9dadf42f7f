"""`pbt`: population based training, a population trained in rounds whose worst members are replaced by
explored clones of the best."""
import math
from typing import Any, Dict, List, Mapping, Optional, Set

from determined.config.lengths import length_unit, length_value
from determined.searcher._adaptive import canonical_searcher_config
from determined.searcher._context import SearchContext
from determined.searcher._explore import explore
from determined.searcher._method import PROGRESS_BEFORE_SHUTDOWN, ExitedReason, SearchMethod, Trained
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter


class PBTSearch(SearchMethod):
    """Population based training.

    Starts `population_size` trials with sampled hyperparameters, each ValidateAfter(length_per_round).
    When every member has reported round k: after `num_rounds` rounds all members are closed and the search
    shuts down once they are. Otherwise the members are ranked by the metric (smaller first when
    `smaller_is_better`, else larger first; a metric that is not a finite number ranks last, ties go to the
    older trial), the worst floor(truncate_fraction * population_size) are closed, and for each of that many
    best a clone is created with `checkpoint={"request_id": <parent>}` (the parent's checkpoint written at the
    end of the round) and `explore`d hyperparameters. Survivors and clones then train to
    (k + 1) * length_per_round: lengths are cumulative, and a clone starts from its parent's length k * length_per_round.

    An early-exited member counts as worst and is replaced like a truncated one: a round replaces
    max(floor(truncate_fraction * population_size), number of exited members) members, the exited first,
    then the worst reported; the parents are the best survivors, cycled when there are fewer survivors than
    replacements. When no member survives a round the search shuts down with failure.

    A clone is created only when a seat is free: never more than `population_size` trials are created and not
    yet closed, so a clone waits for the trial it replaces to close. A parent starts its next round only once
    its clones exist, so the checkpoint they start from is the one it wrote at the end of the round.
    """

    name = "pbt"

    def __init__(
        self,
        population_size: int,
        num_rounds: int,
        length_per_round: int,
        truncate_fraction: float,
        resample_probability: float,
        perturb_factor: float,
        smaller_is_better: bool = True,
        unit: str = "batches",
    ) -> None:
        for field, value in (("population_size", population_size), ("num_rounds", num_rounds),
                             ("length_per_round", length_per_round)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"searcher.{field}: got {value!r}; must be a positive int")
        ranges = (("replace_function.truncate_fraction", truncate_fraction, 0.5),
                  ("explore_function.resample_probability", resample_probability, 1),
                  ("explore_function.perturb_factor", perturb_factor, 1))
        for field, value, high in ranges:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
                raise ValueError(f"searcher.{field}: got {value!r}; must be a number between 0 and {high}")
        self.population_size = population_size
        self.num_rounds = num_rounds
        self.length_per_round = length_per_round
        self.truncate_fraction = float(truncate_fraction)
        self.resample_probability = float(resample_probability)
        self.perturb_factor = float(perturb_factor)
        self.smaller_is_better = smaller_is_better
        self.unit = unit
        self.num_truncate = math.floor(self.truncate_fraction * population_size)
        # State (all of it in snapshot()).
        self.round = 0  # rounds completed by the whole population
        self.members: List[str] = []  # this round's population, oldest first
        self.scores: Dict[str, Optional[float]] = {}  # this round's reports (None: ranks last)
        self.hparams: Dict[str, Dict[str, Any]] = {}
        self.created: List[str] = []
        self.exited: Set[str] = set()
        self.closing: Set[str] = set()
        self.closed: Set[str] = set()
        self.pending: List[Dict[str, Any]] = []  # clones waiting for a free seat: request_id, parent, hparams
        self.held: List[str] = []  # survivors that train on once their clones exist (their checkpoint stays the latest)
        self.over = False
        self.failure = False
        self.shutdown = False
        self.to_create = 0  # first-round members not created yet (one per first-round report on the platform)
        self.stops: Dict[str, Dict[str, Any]] = {}  # why it replaced a member, recorded when it did (_reasons.py)

    @classmethod
    def from_config(cls, searcher_config: Mapping[str, Any]) -> "PBTSearch":
        """The search a `pbt` searcher section describes (canonical, or raw with defaults to fill)."""
        c = canonical_searcher_config(searcher_config, cls.name)
        return cls(
            population_size=c["population_size"],
            num_rounds=c["num_rounds"],
            length_per_round=length_value(c["length_per_round"]),
            truncate_fraction=c["replace_function"]["truncate_fraction"],
            resample_probability=c["explore_function"]["resample_probability"],
            perturb_factor=c["explore_function"]["perturb_factor"],
            smaller_is_better=c["smaller_is_better"],
            unit=length_unit(c["length_per_round"]),
        )

    def _target(self) -> int:
        return (self.round + 1) * self.length_per_round

    def initial_operations(self, ctx: SearchContext) -> List[Operation]:
        """The first members; on the platform at most the context's window now, the others as members report."""
        self.to_create = self.population_size
        window = ctx.window()
        return self._create_members(ctx, self.population_size if window is None else window)

    def _create_members(self, ctx: SearchContext, count: int) -> List[Operation]:
        ops: List[Operation] = []
        for _ in range(min(count, self.to_create)):
            self.to_create -= 1
            request_id = ctx.new_request_id()
            self.hparams[request_id] = ctx.sample_hparams()
            self.members.append(request_id)
            self.created.append(request_id)
            ops += [Create(request_id, self.hparams[request_id]), ValidateAfter(request_id, self._target())]
        return ops

    def on_validation_completed(self, ctx: SearchContext, request_id: str, metric: float, length: int) -> List[Operation]:
        if self.over or request_id not in self.members or request_id in self.scores:
            return []
        self.scores[request_id] = (metric if self.smaller_is_better else -metric) if math.isfinite(metric) else None
        return self._create_members(ctx, 1) + self._round_end(ctx)

    def on_trial_exited_early(self, ctx: SearchContext, request_id: str, reason: ExitedReason) -> List[Operation]:
        if request_id not in self.hparams:
            return []
        self.exited.add(request_id)
        if self.over or request_id not in self.members:
            return []
        self.scores[request_id] = None
        return self._create_members(ctx, 1) + self._round_end(ctx)

    def on_trial_closed(self, ctx: SearchContext, request_id: str) -> List[Operation]:
        if request_id not in self.hparams:
            return []
        self.closed.add(request_id)
        ops: List[Operation] = []
        if not self.over and request_id in self.members and request_id not in self.exited:
            ops += self.on_trial_exited_early(ctx, request_id, ExitedReason.ERRORED)  # ended without our Close
        ops += self._seat_clones()
        if self.over and not self.shutdown and all(rid in self.closed for rid in self.created):
            self.shutdown = True
            ops.append(Shutdown(failure=self.failure))
        return ops

    def _live(self) -> int:
        return sum(1 for rid in self.created if rid not in self.closed)

    def _seat_clones(self) -> List[Operation]:
        """Create waiting clones while seats are free, then let parents whose clones all exist train on."""
        ops: List[Operation] = []
        while self.pending and self._live() < self.population_size:
            clone = self.pending.pop(0)
            request_id = clone["request_id"]
            self.created.append(request_id)
            ops += [
                Create(request_id, clone["hparams"], checkpoint={"request_id": clone["parent"]}),
                ValidateAfter(request_id, self._target()),
            ]
        parents = {clone["parent"] for clone in self.pending}
        ready = [rid for rid in self.held if rid not in parents]
        self.held = [rid for rid in self.held if rid in parents]
        return ops + [ValidateAfter(rid, self._target()) for rid in ready]

    def _ranking(self) -> List[str]:
        order = {rid: i for i, rid in enumerate(self.members)}
        alive = [rid for rid in self.members if rid not in self.exited]
        return sorted(alive, key=lambda rid: (self.scores[rid] is None, self.scores[rid] or 0.0, order[rid]))

    def _close(self, request_ids: List[str]) -> List[Operation]:
        todo = [rid for rid in request_ids if rid not in self.closing and rid not in self.exited]
        self.closing.update(todo)
        return [Close(rid) for rid in todo]

    def _note_replaced(self, ranking: List[str], truncated: List[str], survivors: List[str]) -> None:
        """Why each truncated member was replaced: the round's rule and where it ranked (see _reasons.py)."""

        def unsigned(rid: str) -> Optional[float]:
            score = self.scores.get(rid)
            return None if score is None else (score if self.smaller_is_better else -score)

        for rid in truncated:
            self.stops[rid] = {"rule": "pbt", "round": self.round, "rounds": self.num_rounds,
                               "length": self.round * self.length_per_round, "members": len(self.members),
                               "replaced": len(truncated), "reported": len(ranking), "rank": ranking.index(rid) + 1,
                               "value": unsigned(rid), "cutoff": unsigned(survivors[-1]) if survivors else None,
                               "smaller_is_better": self.smaller_is_better}

    def stop_facts(self, request_id: str) -> Optional[Dict[str, Any]]:
        return self.stops.get(request_id)

    def _round_end(self, ctx: SearchContext) -> List[Operation]:
        if len(self.scores) < len(self.members) or self.pending or self.to_create:
            return []
        self.round += 1
        ranking = self._ranking()
        exited = [rid for rid in self.members if rid in self.exited]
        if self.round >= self.num_rounds or not ranking:
            self.over = True
            self.failure = not ranking
            ops = self._close(self.members)
            if all(rid in self.closed for rid in self.created):
                self.shutdown = True
                ops.append(Shutdown(failure=self.failure))
            return ops
        replaced = max(self.num_truncate, len(exited))
        truncated = ranking[len(ranking) - (replaced - len(exited)):] if replaced > len(exited) else []
        survivors = [rid for rid in ranking if rid not in truncated]
        ops = self._close(truncated)
        self._note_replaced(ranking, truncated, survivors)
        for i in range(replaced):
            parent = survivors[i % len(survivors)]
            request_id = ctx.new_request_id()
            hparams = explore(self.hparams[parent], ctx.hparams_config, ctx.rng, self.resample_probability,
                              self.perturb_factor)
            self.hparams[request_id] = hparams
            self.pending.append({"request_id": request_id, "parent": parent, "hparams": hparams})
        self.members = survivors + [clone["request_id"] for clone in self.pending]
        self.scores = {}
        self.held = list(survivors)
        return ops + self._seat_clones()

    def progress(self, trained: Trained = None) -> float:
        if self.shutdown or self.over:
            return 1.0
        reported = min(len(self.scores), self.population_size)
        done = float((self.round * self.population_size + (0 if self.over else reported)) * self.length_per_round)
        if not self.over and trained:  # what this round's members trained so far in it
            start = self.round * self.length_per_round
            done += sum(min(max(trained.get(rid, start) - start, 0), self.length_per_round)
                        for rid in self.members if rid not in self.scores)
        return min(PROGRESS_BEFORE_SHUTDOWN, done / float(self.length_per_round * self.population_size * self.num_rounds))

    def describe(self) -> Dict[str, Any]:
        """Population, rounds and lengths of this search, for `det preview-search`."""
        return {
            "name": self.name,
            "unit": self.unit,
            "population_size": self.population_size,
            "num_rounds": self.num_rounds,
            "length_per_round": self.length_per_round,
            "replaced_per_round": self.num_truncate,
            "trials": self.population_size + self.num_truncate * (self.num_rounds - 1),
            "total_length": self.length_per_round * self.population_size * self.num_rounds,
        }

    def snapshot(self) -> Dict[str, Any]:
        return {
            "round": self.round,
            "members": list(self.members),
            "scores": dict(self.scores),
            "hparams": {rid: dict(h) for rid, h in self.hparams.items()},
            "created": list(self.created),
            "exited": sorted(self.exited),
            "closing": sorted(self.closing),
            "closed": sorted(self.closed),
            "pending": [dict(c, hparams=dict(c["hparams"])) for c in self.pending],
            "held": list(self.held),
            "over": self.over,
            "failure": self.failure,
            "shutdown": self.shutdown,
            "to_create": self.to_create,
            "stops": {k: dict(v) for k, v in self.stops.items()},
        }

    def restore(self, snapshot: Dict[str, Any]) -> None:
        self.round = int(snapshot["round"])
        self.members = list(snapshot["members"])
        self.scores = {k: (None if v is None else float(v)) for k, v in snapshot["scores"].items()}
        self.hparams = {rid: dict(h) for rid, h in snapshot["hparams"].items()}
        self.created = list(snapshot["created"])
        self.exited = set(snapshot["exited"])
        self.closing = set(snapshot["closing"])
        self.closed = set(snapshot["closed"])
        self.pending = [dict(c, hparams=dict(c["hparams"])) for c in snapshot["pending"]]
        self.held = list(snapshot["held"])
        self.over = bool(snapshot["over"])
        self.failure = bool(snapshot["failure"])
        self.shutdown = bool(snapshot["shutdown"])
        self.to_create = int(snapshot.get("to_create", 0))  # older snapshots: every member was created at start
        self.stops = {str(k): dict(v) for k, v in (snapshot.get("stops") or {}).items()}  # older snapshots: none
