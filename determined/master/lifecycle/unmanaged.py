"""Unmanaged experiments (Determined 0.38's `determined.experimental.core_v2`).

A training script run outside the platform (`python train.py` with DET_MASTER set) records an experiment and a
trial here and reports to them through the ordinary trial routes, as the experiment's owner. The master never
schedules their trials and their search method never runs: the script's own `start` and `close` set a trial's
state, and the experiment's state follows its trials (a running trial makes it ACTIVE; else it is COMPLETED when
one completed, ERROR when one failed, CANCELED when all were canceled). An external experiment id (unique on the
master) and an external trial id (unique within its experiment) let a later run reuse both: it continues the
trial from its latest checkpoint. Their checkpoints are not garbage collected (as in 0.38).
"""
import re
import uuid
from typing import Any, Dict, Mapping, Optional

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.lifecycle import states, trial_notes
from determined.master.db import Experiment, Trial, utcnow
from determined.master.lifecycle.records import get_experiment, trial_seed
from determined.master.problems import RequestProblem

MAX_EXTERNAL_ID = 256
_EXTERNAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$")
MAX_HPARAMS_BYTES = 64 * 1024

# The states a run reports (`PATCH /trials/{id}`), with or without 0.38's `STATE_` prefix.
REPORTED_STATES = {"RUNNING": states.ACTIVE, "ACTIVE": states.ACTIVE, "COMPLETED": states.COMPLETED,
                   "ERROR": states.ERROR, "CANCELED": states.CANCELED}


def check_external_id(value: Any, field: str) -> str:
    """An external id: 1 to 256 characters, letters, digits and `._:@/+=-`, not starting with punctuation."""
    if not isinstance(value, str) or not value or len(value) > MAX_EXTERNAL_ID or not _EXTERNAL_ID.match(value):
        shown = repr(value)[:80]
        raise RequestProblem(400, f"invalid {field}", [
            f"{field}: expected 1 to {MAX_EXTERNAL_ID} characters of letters, digits and ._:@/+=- (starting with a "
            f"letter or digit), got {shown}"])
    return value


def is_unmanaged(exp: Experiment) -> bool:
    return bool(exp.unmanaged)


def experiment_by_external_id(s: Session, external_id: str) -> Optional[Experiment]:
    return s.scalars(select(Experiment).where(Experiment.external_experiment_id == external_id)).first()


def _empty_model_def() -> bytes:
    """An empty .tar.gz: an unmanaged experiment has no model definition, but readers of one get a valid archive."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz"):
        pass
    return buf.getvalue()


def create_experiment(s: Session, config: Dict[str, Any], *, owner: str, owner_id: Optional[int], project_id: int,
                      external_id: Optional[str] = None) -> Experiment:
    """Store a new unmanaged experiment (config already canonical); it has no trial until a run creates one."""
    exp = Experiment(state=states.PAUSED, config=config, model_def=_empty_model_def(), owner=owner, owner_id=owner_id,
                     project_id=project_id, searcher_snapshot=None, searcher_shutdown=False, searcher_failure=False,
                     progress=0.0, unmanaged=True, external_experiment_id=external_id,
                     checkpoint_gc_done=True)  # no checkpoint GC for unmanaged experiments (0.38)
    s.add(exp)
    s.flush()
    return exp


def _check_hparams(hparams: Any) -> Dict[str, Any]:
    import json

    if hparams is None:
        return {}
    if not isinstance(hparams, Mapping):
        raise RequestProblem(400, "invalid trial", [f"hparams: expected an object, got {type(hparams).__name__}"])
    try:
        text = json.dumps(hparams, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise RequestProblem(400, "invalid trial", [f"hparams: not JSON ({e})"]) from None
    if len(text) > MAX_HPARAMS_BYTES:
        raise RequestProblem(400, "invalid trial", [f"hparams: at most {MAX_HPARAMS_BYTES} bytes of JSON"])
    return dict(hparams)


def create_trial(s: Session, exp: Experiment, hparams: Any, external_id: Optional[str] = None) -> Trial:
    """A trial of unmanaged experiment `exp`; with `external_id`, the trial of that id when it exists (0.38's
    PutTrial), whose hyperparameters stay those of its first run."""
    if not is_unmanaged(exp):
        raise RequestProblem(400, f"experiment {exp.id} is not unmanaged: trials are created only in unmanaged "
                                  "experiments (core_v2 scripts run outside the platform)")
    checked = _check_hparams(hparams)
    if external_id is not None:
        found = s.scalars(select(Trial).where(Trial.experiment_id == exp.id,
                                              Trial.external_trial_id == external_id)).first()
        if found is not None:
            return found
    request_id = uuid.uuid4().hex
    trial = Trial(experiment_id=exp.id, request_id=request_id, hparams=checked,
                  seed=trial_seed(int(exp.config["reproducibility"]["experiment_seed"]), request_id),
                  state=states.PAUSED, restarts=0, total_batches=0, runs=0, external_trial_id=external_id)
    s.add(trial)
    s.flush()
    return trial


def _unmanaged_trial(s: Session, trial: Trial) -> Experiment:
    exp = get_experiment(s, trial.experiment_id)
    if not is_unmanaged(exp):
        raise RequestProblem(400, f"trial {trial.id} belongs to a managed experiment ({exp.id}): only the trials of "
                                  "unmanaged experiments are started and ended by their script")
    return exp


def start_trial(s: Session, trial: Trial) -> Dict[str, Any]:
    """A run of the script starts the trial: a new run id; the trial and its experiment are ACTIVE."""
    exp = _unmanaged_trial(s, trial)
    if exp.state in (states.STOPPING_CANCELED,):
        raise RequestProblem(409, f"experiment {exp.id} is being canceled; start a new experiment")
    trial.runs = int(trial.runs or 0) + 1
    trial.state = states.ACTIVE
    trial.end_time = None
    trial.early_exit_reason = None
    trial_notes.note(s, trial.id, f"unmanaged run {trial.runs} started")
    s.flush()
    refresh_state(s, exp)
    return {"trial_run_id": trial.runs}


def set_state(s: Session, trial: Trial, body: Mapping[str, Any]) -> None:
    """`{"state": RUNNING|COMPLETED|ERROR|CANCELED}` (0.38's PATCH /trials/{id}); without a state, nothing but a
    sign of life."""
    exp = _unmanaged_trial(s, trial)
    extra = sorted(set(body) - {"state", "trial_id", "trialId"})
    if extra:
        raise RequestProblem(400, "invalid trial update", [f"{k}: not a field of a trial update (state)" for k in extra])
    raw = body.get("state")
    if raw is None:
        return
    name = raw[len("STATE_"):] if isinstance(raw, str) and raw.startswith("STATE_") else raw
    if name not in REPORTED_STATES:
        raise RequestProblem(400, "invalid trial update", [
            f"state: expected one of {', '.join(sorted(REPORTED_STATES))}, got {repr(raw)[:60]}"])
    new = REPORTED_STATES[name]
    if trial.state == states.CANCELED:
        return  # killed or canceled by a user: the run's own report of its end does not undo that
    if new == states.ACTIVE:
        trial.state, trial.end_time = states.ACTIVE, None
    else:
        trial.state, trial.end_time = new, utcnow()
        trial_notes.note(s, trial.id, f"unmanaged run {trial.runs} ended: {new}")
    s.flush()
    refresh_state(s, exp)


def refresh_state(s: Session, exp: Experiment) -> None:
    """The experiment's state from its trials' (see the module's docstring)."""
    if exp.state == states.STOPPING_CANCELED:
        for trial in s.scalars(select(Trial).where(Trial.experiment_id == exp.id)):
            if trial.state not in states.TRIAL_TERMINAL:
                trial.state, trial.end_time = states.CANCELED, utcnow()
    trial_states = set(s.scalars(select(Trial.state).where(Trial.experiment_id == exp.id).distinct()))
    if exp.state == states.STOPPING_CANCELED:
        new = states.CANCELED
    elif not trial_states:
        return
    elif trial_states & {states.ACTIVE, states.STOPPING_CANCELED, states.STOPPING_KILLED}:
        new = states.ACTIVE
    elif states.COMPLETED in trial_states:
        new = states.COMPLETED
    elif states.ERROR in trial_states:
        new = states.ERROR
    elif trial_states == {states.CANCELED}:
        new = states.CANCELED
    else:
        new = states.PAUSED
    if new == exp.state:
        return
    exp.state = new
    if new in states.EXPERIMENT_TERMINAL:
        exp.end_time = utcnow()
        if new == states.COMPLETED:
            exp.progress = 1.0
    else:
        exp.end_time = None
    exp.checkpoint_gc_done = True


def trial_progress(exp: Experiment, trial: Trial, progress: float) -> None:
    """An unmanaged experiment's progress is the latest progress its running trials reported."""
    if trial.state not in states.TRIAL_TERMINAL:
        exp.progress = float(progress)
