"""What users do to experiments and trials: create, activate, pause, cancel, kill, archive."""
import logging
import time
from typing import Any, Dict, Mapping, Optional

from sqlalchemy.orm import Session

from determined import searcher
from determined.config import (
    InvalidExperimentConfig,
    default_checkpoint_storage,
    load_config_text,
    load_experiment_config,
    no_effect_notes,
)
from determined.config.storage import UNREACHABLE_TYPES, complete_storage
from determined.master.registry import names
from determined.master.lifecycle import states
from determined.master.db import Experiment, Trial
from determined.master.lifecycle.experiment import (
    _check_done,
    _end_trial,
    feed_searcher,
    finish_trial,
    get_experiment,
    get_trial,
    is_running,
    trials_of,
    warm_start_checkpoint,
)
from determined.master.problems import RequestProblem

logger = logging.getLogger("determined.master")


def canonical_config(raw: Any, data_dir: str, *, unmanaged: bool = False) -> Dict[str, Any]:
    """Validate a user config (a mapping, or its YAML text) and fill in what the master decides: checkpoint storage
    (its default, also for a type it cannot reach) and experiment seed. `unmanaged`: no entrypoint is needed."""
    try:
        if isinstance(raw, str):
            raw = load_config_text(raw, "config")
        if not isinstance(raw, Mapping):
            raise InvalidExperimentConfig([f"config: expected a mapping or its YAML text, got {type(raw).__name__}"])
        config = load_experiment_config(raw, unmanaged=unmanaged)
    except InvalidExperimentConfig as e:
        raise RequestProblem(400, e.header, list(e.problems)) from None
    storage = config.get("checkpoint_storage")
    if storage is not None and storage.get("type") in UNREACHABLE_TYPES:
        for note in no_effect_notes({"checkpoint_storage": storage}):
            logger.warning("%s", note)
    config["checkpoint_storage"] = complete_storage(storage, default_checkpoint_storage(str(data_dir), "checkpoints"))
    reproducibility = config.setdefault("reproducibility", {}) or {}
    config["reproducibility"] = reproducibility
    if reproducibility.get("experiment_seed") is None:
        reproducibility["experiment_seed"] = int(time.time()) % (2**31)
    try:
        searcher.make_search_method(config["searcher"])
        searcher.check_trial_count(config)
    except ValueError as e:
        raise RequestProblem(400, "invalid experiment config", [str(e)]) from None
    problems = names.experiment_config_problems(config)
    if problems:
        raise RequestProblem(400, "invalid experiment config", problems)
    return config


def create_experiment(
    s: Session, config: Dict[str, Any], model_def: bytes, *, activate: bool = True, owner: str = "determined"
) -> Experiment:
    """Store a new experiment (config already canonical) and run the search method's initial operations."""
    warm_start_checkpoint(s, config)  # a bad warm start is refused before anything is stored
    exp = Experiment(
        state=states.ACTIVE if activate else states.PAUSED,
        config=config,
        model_def=model_def,
        owner=owner,
        searcher_snapshot=None,
        searcher_shutdown=False,
        searcher_failure=False,
        progress=0.0,
    )
    s.add(exp)
    s.flush()
    feed_searcher(s, exp, [("initial", {})])
    return exp


def _check_managed(exp: Experiment, what: str) -> None:
    if exp.unmanaged:
        raise RequestProblem(400, f"experiment {exp.id} is unmanaged: its state follows the script runs that report "
                                  f"to it, which the master does not {what}; stop the script instead, or cancel/kill "
                                  "the experiment")


def activate(s: Session, experiment_id: int) -> Experiment:
    exp = get_experiment(s, experiment_id)
    _check_managed(exp, "start")
    if exp.state == states.ACTIVE:
        return exp
    if exp.state != states.PAUSED:
        raise RequestProblem(400, f"experiment {exp.id} is {exp.state}; only a PAUSED experiment can be activated")
    exp.state = states.ACTIVE
    for trial in trials_of(s, exp.id):
        if trial.state == states.PAUSED:
            trial.state = states.ACTIVE
    return exp


def pause(s: Session, experiment_id: int) -> Experiment:
    """Pause: running trials are asked to checkpoint and exit; none is started until activation."""
    exp = get_experiment(s, experiment_id)
    _check_managed(exp, "pause")
    if exp.state == states.PAUSED:
        return exp
    if exp.state != states.ACTIVE:
        raise RequestProblem(400, f"experiment {exp.id} is {exp.state}; only an ACTIVE experiment can be paused")
    exp.state = states.PAUSED
    for trial in trials_of(s, exp.id):
        if trial.state == states.ACTIVE:
            trial.state = states.PAUSED
            if is_running(trial):
                trial.preempt_requested = True
    return exp


def cancel(s: Session, experiment_id: int) -> Experiment:
    """Cancel: running trials checkpoint and exit, then the experiment is CANCELED."""
    return _stop(s, experiment_id, kill=False)


def kill(s: Session, experiment_id: int) -> Experiment:
    """Kill: running trial processes are killed at once, then the experiment is CANCELED."""
    return _stop(s, experiment_id, kill=True)


def _stop(s: Session, experiment_id: int, *, kill: bool) -> Experiment:
    exp = get_experiment(s, experiment_id)
    if exp.state in states.EXPERIMENT_TERMINAL:
        return exp
    exp.state = states.STOPPING_CANCELED
    for trial in trials_of(s, exp.id):
        if trial.state in states.TRIAL_TERMINAL:
            continue
        if not is_running(trial):
            _end_trial(trial, states.CANCELED)
        elif kill:
            trial.state = states.STOPPING_KILLED
        elif trial.state != states.STOPPING_KILLED:
            trial.state = states.STOPPING_CANCELED
            trial.preempt_requested = True
    _check_done(s, exp)
    return exp


def archive(s: Session, experiment_id: int) -> Experiment:
    """Hide an ended experiment from `det experiment list` (it stays readable by id)."""
    exp = get_experiment(s, experiment_id)
    if exp.state not in states.EXPERIMENT_TERMINAL:
        raise RequestProblem(400, f"experiment {exp.id} is {exp.state}; only an ended experiment (COMPLETED, CANCELED "
                                  f"or ERROR) can be archived: cancel or kill it first")
    exp.archived = True
    return exp


def unarchive(s: Session, experiment_id: int) -> Experiment:
    exp = get_experiment(s, experiment_id)
    exp.archived = False
    return exp


def kill_trial(s: Session, trial_id: int) -> Trial:
    """Kill one trial; the search method sees it exit early (USER_CANCELED) and the experiment goes on."""
    trial = get_trial(s, trial_id)
    if trial.state in states.TRIAL_TERMINAL:
        return trial
    exp = get_experiment(s, trial.experiment_id)
    if is_running(trial):
        trial.state = states.STOPPING_KILLED
    else:
        finish_trial(s, exp, trial, states.CANCELED, searcher.ExitedReason.USER_CANCELED.value)
    return trial


def config_value(config: Mapping[str, Any], *path: str, default: Optional[Any] = None) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, Mapping) or node.get(key) is None:
            return default
        node = node[key]
    return node
