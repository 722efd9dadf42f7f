"""The trial side of the protocol: what a trial process pulls and reports (docs/internals.md)."""
import base64
import dataclasses
import datetime
import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy import DateTime, bindparam, case, delete, func, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

import determined
from determined.master.registry import names, model_registry
from determined.master.insights import curves, kept_curves
from determined.master.lifecycle import best_validation, states, trial_notes
from determined.master.lifecycle.allocations import running_trial
from determined.master.db import (
    Checkpoint,
    Experiment,
    GroupMetrics,
    SearcherOperation,
    TrainingMetrics,
    Trial,
    ValidationMetrics,
    utcnow,
)
from determined.config.entrypoint import runs_a_script
from determined.master.lifecycle.experiment import (
    fail_search,
    feed_searcher,
    get_experiment,
    latest_own_checkpoint,
    note_scheduling_change,
    pending_operations,
    runs_own_loop,
    start_steps,
    trial_progress,
    validation_reported,
)
from determined.master.problems import RequestProblem, not_found
from determined.master.views.reads import check_group
from determined.searcher._custom import is_custom
from determined.master.storage.storage_roots import is_checkpoint_uuid

MAX_CUSTOM_METRIC_CHARS = 64 * 1024  # a custom search's JSON searcher metric
EXIT_REASONS = ("ERRORED", "USER_CANCELED", "INVALID_HP", "USER_REQUESTED_STOP")


def authorize(trial: Trial, token: Optional[str]) -> None:
    """A request that carries a token must carry the token of the trial's current run.

    A process of an earlier run (killed, restarted) is refused, so it cannot report into the new run.
    Requests without a token (tools on the master's own machine) are allowed.
    """
    if token is not None and token != trial.session_token:
        raise RequestProblem(409, f"trial {trial.id}: this process is not the trial's current run; it should exit")


def trial_context(s: Session, trial: Trial, *, with_model_def: bool = False) -> Dict[str, Any]:
    exp = get_experiment(s, trial.experiment_id)
    own = latest_own_checkpoint(s, trial.id)
    latest: Optional[Dict[str, Any]] = None
    steps = 0
    if own is not None:
        latest = {"uuid": own.uuid, "steps_completed": own.steps_completed}
        steps = own.steps_completed
    elif trial.warm_start_checkpoint_uuid:
        source = s.scalars(select(Checkpoint).where(Checkpoint.uuid == trial.warm_start_checkpoint_uuid)).first()
        latest = {"uuid": trial.warm_start_checkpoint_uuid, "steps_completed": source.steps_completed if source else 0}
        steps = start_steps(s, trial)
    context = {
        "trial_id": trial.id,
        "experiment_id": exp.id,
        "config": exp.config,
        "hparams": trial.hparams,
        "trial_seed": trial.seed,
        "latest_checkpoint": latest,
        "steps_completed": steps,
        "trial_run_id": trial.runs,
    }
    if with_model_def:
        context["model_def"] = model_def_answer(exp)
    return context


def run_start_context(s: Session, trial: Trial, *, cluster_id: str, data_dir: str, with_model_def: bool = True,
                      with_operation: bool = True) -> Dict[str, Any]:
    """`GET /trials/{id}/context`'s answer (the trial's own run's: its config unredacted), by default with what the
    run starts with (`with_model_def`, `with_operation`)."""
    context = trial_context(s, trial, with_model_def=with_model_def)
    context["cluster_id"] = cluster_id
    context["master_data_dir"] = data_dir  # as GET /master/info gives it to anyone
    if with_operation:
        context["searcher_operation"] = next_operation(s, trial)
        context["preempt"] = bool(trial.preempt_requested)
    return context


def model_def_answer(exp: Experiment) -> Dict[str, str]:
    """The experiment's model definition as the routes give it: `{"b64_tgz": <base64 of the .tar.gz>}`."""
    return {"b64_tgz": base64.b64encode(exp.model_def).decode("ascii")}


def next_operation(s: Session, trial: Trial) -> Dict[str, Any]:
    pending = pending_operations(s, trial.id)
    if pending:
        # `length` in batches (what the Trial loops count); `searcher_length` in the searcher's unit (what a Core API
        # script of Determined 0.18-0.37 reads as `op.length`).
        return {"length": pending[0].length_batches, "searcher_length": pending[0].length}
    if trial.close_requested or trial.state in states.TRIAL_TERMINAL:
        return {"completed": True}
    return {"wait": True}


def complete_operation(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    length = _int(body, "length")
    exp = get_experiment(s, trial.experiment_id)
    metric: Any = _custom_metric(body) if is_custom(exp.config.get("searcher")) else _number(body, "metric")
    pending = pending_operations(s, trial.id)
    if not pending:
        if _already_completed(s, trial.id, length):
            return {}
        raise RequestProblem(400, f"trial {trial.id} has no searcher operation in progress; completed length {length} is unexpected")
    op = pending[0]
    if op.length_batches != length:
        if _already_completed(s, trial.id, length):
            return {}
        raise RequestProblem(400, f"trial {trial.id}: the operation in progress trains to {op.length_batches} batches, "
                                  f"but a completion for {length} batches was reported")
    op.completed = True
    trial.total_batches = max(trial.total_batches, length)
    trial.end_time = utcnow()  # the end of its training, unless the search method gives it more work
    feed_searcher(s, exp, [("validation_completed", {"request_id": trial.request_id, "metric": metric, "length": op.length})])
    # What the trial asks next, as `searcher/operation` and the preemption signal would answer it after this change
    # (saves it those requests).
    following = next_operation(s, trial)
    if following.get("wait"):  # the trial waits for the search method: its slot may be wanted by another trial
        note_scheduling_change(s)
    return {"next_operation": following, "preempt": bool(trial.preempt_requested)}


def _already_completed(s: Session, trial_id: int, length: int) -> bool:
    query = select(SearcherOperation).where(SearcherOperation.trial_id == trial_id, SearcherOperation.completed.is_(True),
                                            SearcherOperation.length_batches == length)
    return s.scalars(query).first() is not None


def report_training(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    steps = _int(body, "steps_completed")
    metrics = body.get("metrics") or {}
    batch_metrics = body.get("batch_metrics") or []
    if not isinstance(metrics, Mapping) or not isinstance(batch_metrics, list):
        raise RequestProblem(400, "training metrics: expected metrics as an object and batch_metrics as a list")
    _check_metric_names(metrics, batch_metrics)
    if steps <= (trial.total_batches or 0):  # it may replace or precede stored reports: the curves are read again
        kept_curves.forget(s.connection(), [trial.id])
        curves.cache_of(s.get_bind()).rewritten(trial.id, (trial.metrics_version or 0) + 1)
    s.add(TrainingMetrics(trial_id=trial.id, steps_completed=steps, metrics=_json_safe(metrics),
                          batch_metrics=_json_safe(batch_metrics), end_time=utcnow()))
    trial.total_batches = max(trial.total_batches, steps)
    metrics_changed(trial)
    return {}


def metrics_changed(trial: Trial) -> None:
    """The trial's training or validation metrics change in this transaction: its kept learning curves
    (db.TrialCurve, determined/master/insights/curves.py) are out of date."""
    trial.metrics_version = (trial.metrics_version or 0) + 1


@dataclasses.dataclass(frozen=True)
class TrainingReport:
    """A checked training-metrics report of a trial's current run, its metrics already serialised as JSON."""

    trial_id: int
    token: str
    steps_completed: int
    metrics_json: str
    batch_metrics_json: str
    end_time: datetime.datetime


def training_report(trial_id: int, token: str, body: Mapping[str, Any]) -> TrainingReport:
    """Check a report sent with a trial token (400 on bad input), ready for `store_training_reports`."""
    steps = _int(body, "steps_completed")
    metrics = body.get("metrics") or {}
    batch_metrics = body.get("batch_metrics") or []
    if not isinstance(metrics, Mapping) or not isinstance(batch_metrics, list):
        raise RequestProblem(400, "training metrics: expected metrics as an object and batch_metrics as a list")
    _check_metric_names(metrics, batch_metrics)
    return TrainingReport(trial_id, token, steps, _dumps(metrics), _dumps(batch_metrics), utcnow())


_TRAINING_DELETE = delete(TrainingMetrics).where(
    TrainingMetrics.trial_id == bindparam("tid"), TrainingMetrics.steps_completed == bindparam("steps"))
# The furthest step of the trial, and a new metrics version (its kept learning curves are out of date).
_TOTAL_BATCHES = update(Trial).where(Trial.id == bindparam("tid")).values(
    total_batches=case((Trial.total_batches < bindparam("steps"), bindparam("steps")), else_=Trial.total_batches),
    metrics_version=func.coalesce(Trial.metrics_version, 0) + 1)


def _training_insert(connection: Connection) -> Any:
    # Metrics arrive as JSON text: PostgreSQL casts it to its json column; SQLite stores the text as is.
    value = "CAST(:{} AS JSON)" if connection.dialect.name == "postgresql" else ":{}"
    return text("INSERT INTO training_metrics (trial_id, steps_completed, metrics, batch_metrics, end_time) "
                f"VALUES (:tid, :steps, {value.format('metrics')}, {value.format('batch_metrics')}, :end_time)"
                ).bindparams(bindparam("end_time", type_=DateTime))


def store_training_reports(connection: Connection, reports: Sequence[TrainingReport]) -> List[Optional[BaseException]]:
    """Store training reports of trials' current runs in the caller's transaction (see Master.group_commit).

    Like the one-report route: a report replaces the trial's record at the same step; a trial that does not
    exist is 404; a token that is not the trial's current run is refused with 409 (the process should exit).
    """
    ids = sorted({r.trial_id for r in reports})
    tokens: Dict[int, Optional[str]] = {}
    furthest_stored: Dict[int, int] = {}
    versions: Dict[int, Tuple[int, int]] = {}  # trial -> (its metrics version before this batch, its experiment)
    for tid, token, total, version, exp_id in connection.execute(
            select(Trial.id, Trial.session_token, Trial.total_batches, Trial.metrics_version, Trial.experiment_id)
            .where(Trial.id.in_(ids))):
        tokens[tid], furthest_stored[tid], versions[tid] = token, total or 0, (version or 0, exp_id)
    outcomes: List[Optional[BaseException]] = []
    accepted: Dict[Tuple[int, int], TrainingReport] = {}
    for r in reports:
        if r.trial_id not in tokens:
            outcomes.append(not_found("trial", r.trial_id))
        elif r.token != tokens[r.trial_id]:
            outcomes.append(RequestProblem(
                409, f"trial {r.trial_id}: this process is not the trial's current run; it should exit"))
        else:
            accepted[(r.trial_id, r.steps_completed)] = r  # a later report at the same step replaces an earlier one
            outcomes.append(None)
    if accepted:
        rows = list(accepted.values())
        # A trial's training records never lie past its total_batches (a rollback lowers both): a report past it
        # (the usual case) replaces nothing, and costs no DELETE.
        replacing = [{"tid": r.trial_id, "steps": r.steps_completed} for r in rows
                     if r.steps_completed <= furthest_stored[r.trial_id]]
        replaced = bool(replacing) and connection.execute(_TRAINING_DELETE, replacing).rowcount != 0
        connection.execute(_training_insert(connection), [
            {"tid": r.trial_id, "steps": r.steps_completed, "metrics": r.metrics_json,
             "batch_metrics": r.batch_metrics_json, "end_time": r.end_time} for r in rows])
        furthest: Dict[int, int] = {}
        for r in rows:
            furthest[r.trial_id] = max(furthest.get(r.trial_id, 0), r.steps_completed)
        connection.execute(_TOTAL_BATCHES, [{"tid": t, "steps": steps} for t, steps in sorted(furthest.items())])
        _feed_curves(connection, rows, versions, {r["tid"] for r in replacing} if replaced else set())
    return outcomes


class _CurvePoint:
    """A stored training report as the learning curves read it (its metrics parsed when they are folded in)."""

    __slots__ = ("steps_completed", "end_time", "_json", "_metrics")

    def __init__(self, report: TrainingReport) -> None:
        self.steps_completed, self.end_time, self._json, self._metrics = (
            report.steps_completed, report.end_time, report.metrics_json, None)

    @property
    def metrics(self) -> Any:
        if self._metrics is None:
            self._metrics = json.loads(self._json)
        return self._metrics


def _feed_curves(connection: Connection, rows: Sequence[TrainingReport], versions: Mapping[int, Tuple[int, int]],
                 rewritten: set) -> None:
    """The learning curves follow the stored reports (determined/master/insights/curves.py): a trial's new reports
    are folded into its downsampled curves once the transaction commits; a trial whose stored reports were replaced
    has its kept curves dropped in this transaction (they are read from its points again)."""
    cache = curves.cache_of(connection.engine)
    by_trial: Dict[int, List[TrainingReport]] = {}
    for r in rows:
        by_trial.setdefault(r.trial_id, []).append(r)
    if rewritten:
        kept_curves.forget(connection, sorted(rewritten))
        for tid in rewritten:
            cache.rewritten(tid, versions[tid][0] + 1)
    new = sorted({versions[tid][1] for tid in by_trial if tid not in rewritten and versions[tid][0] == 0})
    trials_of_experiment: Dict[int, int] = {}
    if new:  # a trial's first reports: its curve is started for the experiment's default point count
        trials_of_experiment = dict(connection.execute(select(Trial.experiment_id, func.count(Trial.id))
                                                       .where(Trial.experiment_id.in_(new))
                                                       .group_by(Trial.experiment_id)).all())
    folds = []
    for tid, mine in by_trial.items():
        if tid in rewritten:
            continue
        version, exp_id = versions[tid]
        create = None
        if version == 0 and exp_id in trials_of_experiment:
            points = curves.default_max_points(trials_of_experiment[exp_id])
            create = points if points <= curves.CREATE_ON_WRITE_MAX else None
        mine.sort(key=lambda r: r.steps_completed)
        folds.append((tid, version, [_CurvePoint(r) for r in mine], create))

    def fold() -> None:
        for tid, version, points, create in folds:
            cache.fold(tid, version, points, create)

    if folds:
        kept_curves.after_commit(connection, fold)


def report_validation(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    steps = _int(body, "steps_completed")
    metrics = body.get("metrics")
    if not isinstance(metrics, Mapping):
        raise RequestProblem(400, "validation metrics: expected an object of metrics")
    _check_metric_names(metrics)
    exp = get_experiment(s, trial.experiment_id)
    name = exp.config["searcher"]["metric"]
    smaller = bool(exp.config["searcher"].get("smaller_is_better", True))
    value = metrics.get(name)
    if runs_own_loop(exp):
        # Determined 0.38: the report is stored as it is; the search method decides what a missing metric means
        # (random and grid ignore it, a time-based ASHA search stops with an error).
        return _report_own_loop_validation(s, exp, trial, steps, metrics, value, smaller)
    if value is None and is_custom(exp.config["searcher"]):
        # A custom search reads what the trial's report_completed sends, not the validation (DeepSpeed Autotune's
        # profiling trial reports the model's size only): the report is stored, and it is no trial's best.
        _store_validation(s, trial, steps, metrics)
        _note_validation(s, trial, steps, metrics, False)
        return {"is_best": False}
    if value is None and not runs_a_script(exp.config):
        # A Trial class's validation must hold the searcher metric (its loop reports, then refuses one without it):
        # the config names a metric the trial does not report, and every trial would train, then fail, the same
        # way. The search ends now with the reason, not after each trial's max_restarts.
        reported = ", ".join(sorted(str(k) for k in metrics)) or "none"
        _store_validation(s, trial, steps, metrics)
        _note_validation(s, trial, steps, metrics, False)
        fail_search(s, exp, f"searcher.metric {name!r} is not among the validation metrics the trial reports "
                            f"({reported}): set searcher.metric to one of them (and smaller_is_better to match)")
        return {"is_best": False}
    if value is None:
        # A script's (Core API) report: Determined 0.26/0.38 stored such a report as it is: the searcher gets its metric from
        # `SearcherOperation.report_completed`, and the Trial APIs' loops refuse a validation without it themselves.
        # It cannot be the best validation.
        _store_validation(s, trial, steps, metrics)
        _note_validation(s, trial, steps, metrics, False)
        return {"is_best": False}
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        raise RequestProblem(400, f"the searcher metric {name!r} must be a number, got {value!r}")
    _store_validation(s, trial, steps, metrics)
    is_best = _record_best(s, exp, trial, steps, float(value))
    _note_validation(s, trial, steps, metrics, is_best)
    return {"is_best": is_best}


def _store_validation(s: Session, trial: Trial, steps: int, metrics: Mapping[str, Any]) -> None:
    stored, end_time = _json_safe(metrics), utcnow()
    s.add(ValidationMetrics(trial_id=trial.id, steps_completed=steps, metrics=stored, end_time=end_time))
    trial.latest_validation = _json_safe(metrics)
    trial.total_batches = max(trial.total_batches, steps)
    kept_curves.validation_stored(s, trial, steps, stored, end_time)  # folded into the kept curves at the commit
    metrics_changed(trial)


def _record_best(s: Session, exp: Any, trial: Trial, steps: int, value: float) -> bool:
    """Update the trial's and the experiment's stored best validation in the one order of "best"
    (best_validation.py); whether this validation is now the experiment's best."""
    return best_validation.record_best(s, exp, trial, steps, value)


def _report_own_loop_validation(s: Session, exp: Any, trial: Trial, steps: int, metrics: Mapping[str, Any],
                                value: Any, smaller: bool) -> Dict[str, Any]:
    _store_validation(s, trial, steps, metrics)
    is_best = False
    if not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(float(value)):
        is_best = _record_best(s, exp, trial, steps, float(value))
    _note_validation(s, trial, steps, metrics, is_best)
    validation_reported(s, exp, trial, dict(metrics))
    return {"is_best": is_best}


def _note_validation(s: Session, trial: Trial, steps: int, metrics: Mapping[str, Any], is_best: bool) -> None:
    best = " (the best of the experiment so far)" if is_best else ""
    trial_notes.note(s, trial.id, f"validation at batch {steps}: {trial_notes.metrics_text(metrics)}{best}")


# Names a metric group may not take: they name the two groups that have their own tables and routes.
_RESERVED_GROUPS = ("training", "validation")


def report_group_metrics(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    """Metrics of any group other than training and validation (`report_metrics(group, ...)`, the profiler's).

    A report replaces the trial's record of the same group at the same step (a restarted run reports it again).
    """
    group = check_group(body.get("group"))
    if group in _RESERVED_GROUPS:
        raise RequestProblem(400, f"metric group {group!r} has its own route: POST /trials/{{id}}/{group}_metrics")
    steps = _int(body, "steps_completed")
    metrics = body.get("metrics")
    if not isinstance(metrics, Mapping):
        raise RequestProblem(400, f"{group} metrics: expected an object of metrics")
    _check_metric_names(metrics)
    s.execute(delete(GroupMetrics).where(GroupMetrics.trial_id == trial.id, GroupMetrics.group_name == group,
                                         GroupMetrics.steps_completed == steps))
    s.add(GroupMetrics(trial_id=trial.id, group_name=group, steps_completed=steps, metrics=_json_safe(metrics),
                       end_time=utcnow()))
    return {}


def report_progress(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    """`{progress: 0..1}`: how far the trial is (`report_progress`); the search method's progress follows."""
    progress = _number(body, "progress")
    if not 0.0 <= progress <= 1.0:
        raise RequestProblem(400, f"progress: expected a fraction from 0 to 1, got {progress}")
    trial_progress(s, get_experiment(s, trial.experiment_id), trial, progress)
    return {}


MAX_STATUS = 1024
MAX_METADATA_BYTES = 64 * 1024


def set_runner_status(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    """`{state: "text"}`: the status text the trial's code set (`set_status`), shown with the trial."""
    status = body.get("state")
    if not isinstance(status, str) or len(status) > MAX_STATUS:
        raise RequestProblem(400, f"runner state: expected a string of at most {MAX_STATUS} characters, got {status!r}")
    trial.runner_status = status
    return {}


def set_run_metadata(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    """`{metadata: {...}}`: the trial's metadata (`set_metadata`), kept across its restarts; merged, keys replaced."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        raise RequestProblem(400, "metadata: expected a JSON object")
    merged = {**(trial.run_metadata or {}), **_json_safe(metadata)}
    if len(json.dumps(merged)) > MAX_METADATA_BYTES:
        raise RequestProblem(400, f"metadata: at most {MAX_METADATA_BYTES} bytes of JSON per trial")
    trial.run_metadata = merged
    return {"metadata": merged}


def run_metadata(s: Session, trial: Trial) -> Dict[str, Any]:
    return {"metadata": dict(trial.run_metadata or {})}


def best_searcher_validation(s: Session, trial: Trial) -> Dict[str, Any]:
    """The best value of `searcher.metric` in the trial's experiment (404 while there is none)."""
    exp = get_experiment(s, trial.experiment_id)
    if exp.best_validation is None:
        raise RequestProblem(404, f"experiment {exp.id} has no validation with its searcher metric yet")
    return {"metric": exp.best_validation}


def report_checkpoint(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    uuid = body.get("uuid")
    if not is_checkpoint_uuid(uuid):
        raise RequestProblem(400, f"checkpoint: uuid must be a UUID in canonical form, as str(uuid.uuid4()) writes it "
                                  f"(e.g. 3f6c2a1e-8d4b-4c3a-9f1e-2b7d5e8a9c10), got {_shown(uuid)}",
                             ["uuid: checkpoints are named by a new random UUID; determined.core names them itself"])
    steps = _int(body, "steps_completed")
    resources = body.get("resources") or {}
    metadata = body.get("metadata") or {}
    if not isinstance(resources, Mapping) or not isinstance(metadata, Mapping):
        raise RequestProblem(400, "checkpoint: resources and metadata must be objects")
    model_registry.check_metadata_size(metadata)
    existing = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
    if existing is not None:
        if existing.trial_id != trial.id:
            raise RequestProblem(409, f"checkpoint {uuid} already belongs to trial {existing.trial_id}")
        return {}
    now = utcnow()
    s.add(Checkpoint(uuid=uuid, experiment_id=trial.experiment_id, trial_id=trial.id, state=states.COMPLETED,
                     steps_completed=steps, resources=_json_safe(resources), framework=str(body.get("framework") or ""),
                     format=str(body.get("format") or ""), metadata_=_json_safe(metadata),
                     determined_version=determined.__version__, start_time=now, end_time=now))
    s.flush()
    latest = latest_own_checkpoint(s, trial.id)
    trial.latest_checkpoint_uuid = latest.uuid if latest is not None else uuid
    trial.total_batches = max(trial.total_batches, steps)
    trial_notes.note(s, trial.id, trial_notes.checkpoint_text(uuid, steps, resources, now))
    return {}


def delete_own_checkpoint(s: Session, trial: Trial, uuid: str) -> Dict[str, Any]:
    """A trial deletes one of its checkpoints (`CheckpointContext.delete`): marked DELETED before its files go, so a
    COMPLETED checkpoint never lacks files. A checkpoint in the model registry is kept (409)."""
    ckpt = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
    if ckpt is None or ckpt.trial_id != trial.id:
        raise RequestProblem(404, f"trial {trial.id} has no checkpoint {uuid}")
    if ckpt.state == states.DELETED:
        return {}
    if uuid in model_registry.registered_uuids(s, [uuid]):
        raise RequestProblem(409, f"checkpoint {uuid} is registered in the model registry; it is not deleted")
    ckpt.state = states.DELETED
    s.flush()
    latest = latest_own_checkpoint(s, trial.id)
    trial.latest_checkpoint_uuid = latest.uuid if latest is not None else None
    return {}


def early_exit(s: Session, trial: Trial, body: Mapping[str, Any]) -> Dict[str, Any]:
    reason = body.get("reason")
    if reason not in EXIT_REASONS:
        raise RequestProblem(400, f"early exit: reason must be one of {', '.join(EXIT_REASONS)}, got {reason!r}")
    trial.early_exit_reason = str(reason)
    return {}


def preemption_signal(s: Session, allocation_id: str) -> Dict[str, Any]:
    trial = running_trial(s, allocation_id)
    if trial is None:
        return {"preempt": True}  # an allocation that is no longer current must stop
    return {"preempt": bool(trial.preempt_requested)}


def acknowledge_preemption(s: Session, allocation_id: str) -> Dict[str, Any]:
    """The run will checkpoint and exit because it was asked to: its exit 0 then means "resume me later"."""
    trial = running_trial(s, allocation_id)
    if trial is not None:
        trial.preempt_acked = True
    return {}


def _check_metric_names(metrics: Mapping[str, Any], batch_metrics: Sequence[Any] = ()) -> None:
    keys = set(metrics)
    for batch in batch_metrics:
        if isinstance(batch, Mapping):
            keys.update(batch)
    names.check_metric_names(keys, "metrics")


def _int(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RequestProblem(400, f"{key}: expected a non-negative integer, got {value!r}")
    return value


def _number(body: Mapping[str, Any], key: str) -> float:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestProblem(400, f"{key}: expected a number, got {value!r}")
    return float(value)


def _custom_metric(body: Mapping[str, Any]) -> Any:
    """The searcher metric of a custom search: a number, or any JSON value (its search method reads it)."""
    value = body.get("metric")
    if isinstance(value, (dict, list, str)):
        if len(json.dumps(value)) > MAX_CUSTOM_METRIC_CHARS:
            raise RequestProblem(400, f"metric: a JSON value of at most {MAX_CUSTOM_METRIC_CHARS} characters, got "
                                      f"{_shown(value)}")
        return value
    return _number(body, "metric")


def _shown(value: Any, limit: int = 80) -> str:
    """`value` for an error message, cut to `limit` characters (a client's input is never echoed whole)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _dumps(value: Any) -> str:
    """JSON text of reported metrics; NaN and infinities become null (as `_json_safe`)."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(_json_safe(value))


def _json_safe(value: Any) -> Any:
    """JSON data with NaN and infinities replaced by None (SQLite's JSON cannot hold them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


__all__: List[str] = [
    "TrainingReport", "acknowledge_preemption", "authorize", "best_searcher_validation", "check_group",
    "complete_operation", "delete_own_checkpoint", "early_exit", "next_operation", "preemption_signal", "report_checkpoint",
    "report_group_metrics", "report_progress", "report_training", "report_validation", "run_metadata",
    "set_run_metadata", "set_runner_status", "store_training_reports", "trial_context", "training_report",
]
