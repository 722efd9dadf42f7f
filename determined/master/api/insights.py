"""Routes the web UI needs for one experiment: every trial's metrics at once, hyperparameter importance, and
the search method's progress (for ASHA: the trials in each rung of each bracket)."""
import collections
import gzip
import json
import threading
from typing import Any, Dict, List, Optional, Tuple

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy import select
from starlette.background import BackgroundTask
from sqlalchemy.orm import Session

from determined import searcher
from determined.config import canonical_hparams, dotted, flat_hparams, hparam_leaves
from determined.master.insights import curves, importance, kept_curves
from determined.master.views import model_files, serialize
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas.insights import (ExperimentMetrics, HyperparameterImportance, ModelFiles,
                                                   SearcherProgress)
from determined.master.db import Experiment, SearcherOperation, TrainingMetrics, Trial, ValidationMetrics
from determined.master.lifecycle.experiment import get_experiment, load_searcher, trials_of

router = APIRouter()


@router.get("/experiments/{experiment_id}/metrics", response_model=ExperimentMetrics)
def experiment_metrics(request: Request, experiment_id: int,
                       max_points: Optional[str] = Query(None, max_length=32)) -> Response:
    """Every trial's metrics by group (`training`, `validation`: `[{"steps_completed", "end_time", "metrics"}]`),
    the groups and the names of the numeric metrics reported in each, for learning curves.

    Each trial's series is downsampled to at most `max_points` points per metric (MIN_POINTS to MAX_POINTS of
    determined/master/insights/curves.py; default: EXPERIMENT_BUDGET shared by the trials), keeping the first and last
    point and each bucket's minimum and maximum; `max_points` in the answer says what was used."""
    master = master_of(request)
    with problems_as_http(), master.read() as s:
        get_experiment(s, experiment_id)
        trials = trials_of(s, experiment_id)
        points = (curves.check_max_points(max_points) if max_points is not None
                  else curves.default_max_points(len(trials)))
        cache = curves.cache_of(master)
        versions = [(t.id, t.metrics_version or 0) for t in trials]
        computed: Dict[str, List[Any]] = {"training": [], "validation": []}
        series: Dict[int, Dict[str, Any]] = {t.id: {} for t in trials}
        names: Dict[str, set] = {"training": set(), "validation": set()}
        for kind, table in (("training", TrainingMetrics), ("validation", ValidationMetrics)):
            def read(chunk: List[int], table: Any = table) -> Dict[int, List[Any]]:
                rows: Dict[int, List[Any]] = {tid: [] for tid in chunk}
                # Columns, not objects: through the session's connection, without the ORM's loading of each row.
                for row in s.connection().execute(
                        select(table.trial_id, table.steps_completed, table.end_time, table.metrics)
                        .where(table.trial_id.in_(chunk)).order_by(table.trial_id, table.steps_completed, table.id)):
                    rows[row.trial_id].append(row)
                return rows

            answer = cache.series(versions, kind, points, read, tail=kept_curves.tail_reader(s, table),
                                  load=kept_curves.kept_loader(s, kind, points), save=computed[kind].extend)
            for tid, (points_of, reported) in answer.items():
                series[tid][kind] = points_of
                names[kind].update(reported)
        # The cached series are JSON text already: the answer is put together, not encoded again.
        parts = []
        for t in trials:
            head = _json({"trial_id": t.id, "state": t.state, "hparams": t.hparams, "best_validation": t.best_validation,
                          "total_batches": t.total_batches,
                          "start_time": serialize.timestamp(t.start_time) if t.runs else None})
            parts.append(f'{head[:-1]},"training":{series[t.id]["training"]},"validation":{series[t.id]["validation"]}}}')
        tail = _json({"groups": ["training", "validation"],
                      "metric_names": {kind: sorted(v) for kind, v in names.items()}, "max_points": points})
    response = _maybe_gzip(request, ('{"trials":[' + ",".join(parts) + "]," + tail[1:]).encode("utf-8"))
    if any(computed.values()):  # what changed is kept for the next start, once the answer is sent

        def keep_changed() -> None:
            for kind, changed in computed.items():
                if changed:
                    kept_curves.keep(master, kind, points, changed)

        response.background = BackgroundTask(keep_changed)
    return response


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


GZIP_FROM = 64 * 1024  # bytes of an answer from which it is compressed for a client that accepts gzip


def _maybe_gzip(request: Request, body: bytes) -> Response:
    """A JSON answer, gzip-compressed when it is big and the client accepts it (every browser does): the curves
    of a thousand trials shrink about six times."""
    if len(body) >= GZIP_FROM and "gzip" in request.headers.get("accept-encoding", "").lower():
        return Response(gzip.compress(body, 4), media_type="application/json",
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(body, media_type="application/json", headers={"Vary": "Accept-Encoding"})


@router.get("/experiments/{experiment_id}/model_files", response_model=ModelFiles)
def experiment_model_files(request: Request, experiment_id: int) -> Dict[str, Any]:
    """The files of the experiment's model definition: `{"files": [{"path", "size", "text"}], "truncated"}`
    (`text` null for binary or big files; determined/master/views/model_files.py)."""
    with problems_as_http(), master_of(request).read() as s:
        archive = get_experiment(s, experiment_id).model_def
    return model_files.model_files(archive)


# ---------------------------------------------------------------- hyperparameter importance

_cache_lock = threading.Lock()
_cache: "collections.OrderedDict[Tuple[Any, ...], Dict[str, float]]" = collections.OrderedDict()
_CACHE_SIZE = 64


def _trial_values(s: Session, exp: Experiment, metric: str, smaller_is_better: bool) -> List[Tuple[int, Dict[str, Any], float]]:
    """(trial id, hparams, the trial's best value of `metric` over its validations) for trials that reported it."""
    trials = {t.id: t for t in trials_of(s, exp.id)}
    best: Dict[int, float] = {}
    rows = s.execute(select(ValidationMetrics.trial_id, ValidationMetrics.metrics)
                     .where(ValidationMetrics.trial_id.in_(list(trials))))
    for trial_id, metrics in rows:
        value = (metrics or {}).get(metric)
        if not curves.numeric(value):
            continue
        old = best.get(trial_id)
        if old is None or (value < old if smaller_is_better else value > old):
            best[trial_id] = float(value)
    return [(tid, trials[tid].hparams or {}, v) for tid, v in sorted(best.items())]


@router.get("/experiments/{experiment_id}/hyperparameter_importance", response_model=HyperparameterImportance)
def hyperparameter_importance(request: Request, experiment_id: int, metric: Optional[str] = None) -> Dict[str, Any]:
    """`{"metric", "smaller_is_better", "num_trials", "importance": {hparam: share}, "method"}`: for each searched
    hyperparameter, the share of the variance of the trials' best `metric` (default: the searcher metric) it
    explains on its own (determined/master/insights/importance.py). Empty with fewer than 3 trials that reported it."""
    with problems_as_http(), master_of(request).read() as s:
        exp = get_experiment(s, experiment_id)
        searcher_config = exp.config["searcher"]
        metric = metric or searcher_config["metric"]
        smaller = bool(searcher_config.get("smaller_is_better", True))
        values = _trial_values(s, exp, metric, smaller)
        specs = exp.config.get("hyperparameters") or {}
        seed = int((exp.config.get("reproducibility") or {}).get("experiment_seed") or 0)
    key = (experiment_id, metric, tuple((tid, v) for tid, _, v in values))
    with _cache_lock:
        shares = _cache.get(key)
    if shares is None:
        # Nested hyperparameters are columns under their dotted names, as Determined's UI showed them.
        flat_specs = {dotted(path): spec for path, spec in hparam_leaves(canonical_hparams(specs))}
        flat_values = [(flat_hparams(h, specs), v) for _, h, v in values]
        shares = importance.hyperparameter_importance(flat_specs, flat_values, seed=seed)
        with _cache_lock:
            _cache[key] = shares
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return {"metric": metric, "smaller_is_better": smaller, "num_trials": len(values), "importance": shares,
            "method": "random forest, first-order variance decomposition (fANOVA-style)",
            "min_trials": importance.MIN_TRIALS}


# ---------------------------------------------------------------- searcher progress


_BRACKETS = (searcher.AsyncHalvingSearch, searcher.StoppingBracket)


def _halving_brackets(method: Any) -> Optional[List[Any]]:
    if isinstance(method, _BRACKETS):
        return [method]
    brackets = getattr(method, "brackets", None)
    if isinstance(brackets, list) and brackets and all(isinstance(b, _BRACKETS) for b in brackets):
        return brackets
    return None


def _asha_rungs(bracket: Any, trial_ids: Dict[str, int]) -> List[Dict[str, Any]]:
    """The rungs of a bracket: promotion-based (0.37), or stopping-based (0.38, in units of the time metric: a trial
    counts as promoted out of a rung once it passed it)."""
    stopping = isinstance(bracket, searcher.StoppingBracket)
    lengths = bracket.units_needed if stopping else bracket.rung_lengths
    rungs = []
    for index, length in enumerate(lengths):
        entries = bracket.rungs[index] if index < len(bracket.rungs) else []
        reported = [{"trial_id": trial_ids.get(entry[0]), "request_id": entry[0],
                     "promoted": bracket.trial_rung.get(entry[0], 0) > index if stopping else bool(entry[2]),
                     "metric": None if entry[1] >= 1e300 else (entry[1] if bracket.smaller_is_better else -entry[1])}
                    for entry in entries]
        if stopping:
            running = [trial_ids.get(rid) for rid, rung in sorted(bracket.trial_rung.items())
                       if rung == index and rid not in bracket.stopped]
        else:
            running = [trial_ids.get(rid) for rid in sorted(bracket.outstanding) if bracket.trial_rung.get(rid) == index]
        rungs.append({"index": index, "length": length, "reported": reported, "in_progress": running,
                      "promoted": sum(1 for e in reported if e["promoted"])})
    return rungs


def _rungs_by_length(s: Session, trials: List[Trial]) -> List[Dict[str, Any]]:
    """For methods without rungs of their own: the lengths trials were asked to train to, and who got there."""
    by_length: Dict[int, Dict[str, List[Optional[int]]]] = {}
    ops = s.scalars(select(SearcherOperation).where(SearcherOperation.trial_id.in_([t.id for t in trials]))
                    .order_by(SearcherOperation.id))
    for op in ops:
        entry = by_length.setdefault(op.length, {"reported": [], "in_progress": []})
        entry["reported" if op.completed else "in_progress"].append(op.trial_id)
    return [{"index": i, "length": length,
             "reported": [{"trial_id": tid, "promoted": False, "metric": None} for tid in by_length[length]["reported"]],
             "in_progress": by_length[length]["in_progress"], "promoted": 0}
            for i, length in enumerate(sorted(by_length))]


@router.get("/experiments/{experiment_id}/searcher_progress", response_model=SearcherProgress,
            response_model_exclude_unset=True)
def searcher_progress(request: Request, experiment_id: int) -> Dict[str, Any]:
    """`{"name", "unit", "progress", "trials_by_state", "brackets": [{"rungs": [{"index", "length", "reported":
    [{"trial_id", "metric", "promoted"}], "in_progress": [trial ids], "promoted"}]}]}`; lengths in the searcher's
    unit. ASHA methods give their own brackets and rungs; other methods one bracket of the lengths trials
    were asked to reach."""
    with problems_as_http(), master_of(request).read() as s:
        exp = get_experiment(s, experiment_id)
        trials = trials_of(s, experiment_id)
        by_state = collections.Counter(t.state for t in trials)
        trial_ids = {t.request_id: t.id for t in trials}
        method = load_searcher(exp)
        halving = _halving_brackets(method.method)
        if halving is not None:
            brackets = [{"rungs": _asha_rungs(b, trial_ids), "max_trials": b.max_trials} for b in halving]
        else:
            brackets = [{"rungs": _rungs_by_length(s, trials), "max_trials": None}]
        return {"name": exp.config["searcher"]["name"], "unit": method.unit, "progress": float(exp.progress or 0.0),
                "trials_by_state": dict(by_state), "brackets": brackets}
