"""What the 0.38 SDK and CLI change on a stored experiment: its name, description, labels, notes, scheduling
settings (`det e set ...`); deleting an ended experiment with everything it stored; continuing an ended one."""
import logging
from typing import TYPE_CHECKING, Any, Dict, List

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from determined.master.insights import curves
from determined.master.security import auth
from determined.master.storage import gc
from determined.master.registry import names, model_registry, trial_sources
from determined.master.lifecycle import states, trial_notes
from determined.master.db import (Checkpoint, Experiment, GroupMetrics, SearcherEvent, SearcherOperation,
                                  TrainingMetrics, Trial, TrialCurve, TrialLog, ValidationMetrics)
from determined.master.lifecycle.experiment import get_experiment
from determined.master.problems import RequestProblem

if TYPE_CHECKING:
    from determined.master.master import Master

logger = logging.getLogger("determined.master")

FIELDS = ("name", "description", "labels", "notes", "resources")
RESOURCE_FIELDS = ("max_slots", "weight", "priority")
MAX_NOTES = 64 * 1024


def check_update(fields: Dict[str, Any]) -> List[str]:
    """The problems of an experiment update (empty: none)."""
    problems: List[str] = []
    if "name" in fields:
        problem = names.name_problem(fields["name"], slashes=True)
        problems += [f"name: {problem}"] if problem else []
    for key, limit in (("description", names.MAX_DESCRIPTION_CHARS), ("notes", MAX_NOTES)):
        if key in fields:
            problem = names.description_problem(fields[key], key)
            if problem is None and len(fields[key]) > limit:
                problem = f"{key}: {len(fields[key])} characters; at most {limit} are allowed"
            problems += [problem] if problem else []
    if "labels" in fields:
        problems += (names.label_problems(fields["labels"]) if fields["labels"] is not None
                     else ["labels: expected a list of strings"])
    if "resources" in fields:
        res = fields["resources"]
        if not isinstance(res, dict) or set(res) - set(RESOURCE_FIELDS):
            problems.append(f"resources: expected a mapping of {', '.join(RESOURCE_FIELDS)}")
        else:
            if "max_slots" in res and res["max_slots"] is not None and (
                    isinstance(res["max_slots"], bool) or not isinstance(res["max_slots"], int) or res["max_slots"] < 1):
                problems.append(f"resources.max_slots: expected a positive integer or null, got {res['max_slots']!r}")
            if "weight" in res and (isinstance(res["weight"], bool) or not isinstance(res["weight"], (int, float))
                                    or not res["weight"] > 0):
                problems.append(f"resources.weight: expected a positive number, got {res['weight']!r}")
            if "priority" in res and (isinstance(res["priority"], bool) or not isinstance(res["priority"], int)
                                      or not 1 <= res["priority"] <= 99):
                problems.append(f"resources.priority: expected an integer from 1 to 99, got {res['priority']!r}")
    return problems


def apply_update(exp: Experiment, fields: Dict[str, Any]) -> None:
    """Apply a checked update: name/description/labels/resources live in the config (as in Determined's)."""
    config = dict(exp.config)
    for key in ("name", "description", "labels"):
        if key in fields:
            config[key] = list(dict.fromkeys(fields[key])) if key == "labels" else fields[key]
    if "resources" in fields:
        config["resources"] = {**(config.get("resources") or {}), **fields["resources"]}
    exp.config = config
    if "notes" in fields:
        exp.notes = fields["notes"]


def delete_experiment(master: "Master", experiment_id: int, principal: auth.Principal) -> List[str]:
    """Delete an ended experiment: its checkpoints' files, then every row it stored. Refused while it runs, or
    while a checkpoint of it is a version in the model registry (nothing is deleted then). Returns the uuids of
    the checkpoints whose files were deleted."""
    with master.read() as s:
        exp = get_experiment(s, experiment_id)
        auth.check_experiment_owner(principal, exp, "delete")
        if exp.state not in states.EXPERIMENT_TERMINAL:
            raise RequestProblem(400, f"experiment {experiment_id} is {exp.state}; only an ended experiment (COMPLETED, "
                                      f"CANCELED, ERROR) can be deleted: cancel or kill it first")
        uuids = list(s.scalars(select(Checkpoint.uuid).where(Checkpoint.experiment_id == experiment_id,
                                                             Checkpoint.state.in_((states.COMPLETED,
                                                                                   gc.PARTIALLY_DELETED)))))
        _refuse_registered(s, experiment_id)
        storage_config = exp.config.get("checkpoint_storage")
    deleted = gc.delete_stored(master, experiment_id, storage_config, uuids, "experiment deletion", raise_errors=True)
    with master.write() as s:
        _refuse_registered(s, experiment_id)  # registered since the check above: its files were kept
        trial_ids = list(s.scalars(select(Trial.id).where(Trial.experiment_id == experiment_id)))
        trial_sources.forget_experiment(
            s, trial_ids, list(s.scalars(select(Checkpoint.uuid).where(Checkpoint.experiment_id == experiment_id))))
        for table in (TrialLog, TrainingMetrics, ValidationMetrics, GroupMetrics, SearcherOperation, TrialCurve):
            s.execute(delete(table).where(table.trial_id.in_(trial_ids)))
        s.execute(delete(Checkpoint).where(Checkpoint.experiment_id == experiment_id))
        s.execute(delete(SearcherEvent).where(SearcherEvent.experiment_id == experiment_id))
        s.execute(delete(Trial).where(Trial.experiment_id == experiment_id))
        s.execute(delete(Experiment).where(Experiment.id == experiment_id))
    cache = curves.cache_of(master)  # a later trial may get a deleted one's id (SQLite reuses the largest ids)
    for trial_id in trial_ids:
        cache.rewritten(trial_id, 0)
    logger.info("experiment %s deleted (%s checkpoint(s) removed from storage)", experiment_id, len(deleted))
    return deleted


def _refuse_registered(s: Session, experiment_id: int) -> None:
    uuids = list(s.scalars(select(Checkpoint.uuid).where(Checkpoint.experiment_id == experiment_id)))
    registered = model_registry.registered_uuids(s, uuids)
    if registered:
        raise RequestProblem(400, f"experiment {experiment_id} has checkpoints in the model registry "
                                  f"({', '.join(sorted(registered))}); delete those model versions first")


CONTINUABLE = ("single", "random", "grid")


def continue_experiment(s: Session, experiment_id: int, override: Any, data_dir: str) -> Experiment:
    """Continue an ended experiment (Determined 0.38's `det e continue`): its trials that have not COMPLETED (a
    `single` experiment's one trial, whatever its state) train on from their latest checkpoint to the searcher's
    max_length, restart counts reset. `override` (a `single` experiment only) is merged into the config first,
    e.g. a longer `searcher.max_length`; it may not change the searcher's name, the workspace or the project."""
    from determined import searcher as searchers
    from determined.config.overrides import merge_template
    from determined.master.lifecycle.actions import canonical_config
    from determined.master.lifecycle.experiment import rollback_to_checkpoint, trials_of
    from determined.master.lifecycle.lengths import to_batches

    exp = get_experiment(s, experiment_id)
    if exp.unmanaged:
        raise RequestProblem(400, f"experiment {exp.id} is unmanaged: the master cannot run its script; run the "
                                  "script again with the same external_experiment_id/external_trial_id to continue it")
    if exp.state not in states.EXPERIMENT_TERMINAL:
        raise RequestProblem(400, f"experiment {exp.id} is {exp.state}; only an ended experiment (COMPLETED, CANCELED, "
                                  "ERROR) can be continued: wait for it, or activate it if it is PAUSED")
    name = exp.config["searcher"]["name"]
    if name not in CONTINUABLE:
        raise RequestProblem(400, f"experiment {exp.id} uses the {name} searcher; only {', '.join(CONTINUABLE)} "
                                  "experiments can be continued")
    config = exp.config
    if override:
        if not isinstance(override, dict):
            raise RequestProblem(400, "invalid continue", ["override_config: expected a mapping of config fields"])
        if name != "single":
            raise RequestProblem(400, f"experiment {exp.id} uses the {name} searcher: its config can be changed on "
                                      "continue only for the single searcher")
        touched = sorted({"workspace", "project"} & set(override))
        if touched or (override.get("searcher") or {}).get("name", name) != name:
            raise RequestProblem(400, "invalid continue", [f"{k}: cannot be changed when continuing"
                                                           for k in touched or ["searcher.name"]])
        config = canonical_config(merge_template(override, config), data_dir)
    method = searchers.make_search_method(config["searcher"])
    trials = trials_of(s, exp.id)
    todo = []
    for trial in trials if name == "single" else [t for t in trials if t.state != states.COMPLETED]:
        length = to_batches(method.unit, method.max_length, trial.hparams, config)
        rollback_to_checkpoint(s, exp, trial)
        if trial.total_batches < length:
            todo.append((trial, length))
    if not todo:
        raise RequestProblem(400, f"experiment {exp.id} has nothing to continue: its trials completed their "
                                  "max_length" + (" (raise searcher.max_length with --config)" if name == "single"
                                                  else ""))
    exp.config = config
    for trial, length in todo:
        s.execute(delete(SearcherOperation).where(SearcherOperation.trial_id == trial.id,
                                                  SearcherOperation.completed.is_(False)))
        s.add(SearcherOperation(trial_id=trial.id, length=method.max_length, length_batches=length, completed=False))
        trial.state, trial.restarts, trial.close_requested = states.ACTIVE, 0, True
        trial.end_time, trial.early_exit_reason, trial.preempt_requested = None, None, False
        trial_notes.note(s, trial.id, f"experiment continued: the trial trains from batch {trial.total_batches} "
                                      f"to {length}")
    exp.state, exp.end_time, exp.checkpoint_gc_done = states.ACTIVE, None, False
    exp.searcher_shutdown, exp.searcher_failure = True, False  # the trials' own ops end it: no new trials
    s.flush()
    return exp
