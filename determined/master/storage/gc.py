"""Checkpoint garbage collection: what an ended experiment keeps, and deleting the rest from storage.

The checkpoints kept are the union of the experiment's `save_experiment_best` best, per trial its
`save_trial_best` best and its `save_trial_latest` latest, every checkpoint registered in the model
registry, and every checkpoint an unfinished trial started from and still needs (it has none of its own yet).
"Best" is determined.common.checkpoint_order's, the order every reader of "best" uses: the searcher metric of the
validation at the checkpoint's steps (direction from `searcher.smaller_is_better`; checkpoints with no such
validation rank last), then more batches, then the lower trial id, then the uuid. Only COMPLETED checkpoints
take part.
"""
import logging
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Set, Tuple

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from determined.common import checkpoint_order
from determined.config.storage import GC_DEFAULTS
from determined.master.registry import model_registry
from determined.master.lifecycle import states
from determined.master.db import Checkpoint, Experiment, Trial, ValidationMetrics
from determined.master.lifecycle.experiment import get_experiment
from determined.master.problems import RequestProblem
from determined.master.storage.access import storage_manager
from determined.master.storage.storage_roots import is_checkpoint_uuid
from determined.storage._safe_tree import LinkedCheckpoint

if TYPE_CHECKING:
    from determined.master.master import Master

logger = logging.getLogger("determined.master")

POLICY_KEYS = tuple(GC_DEFAULTS)


def gc_policy(exp: Experiment, overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, int]:
    """The experiment's save_experiment_best/save_trial_best/save_trial_latest, with `overrides` checked and applied."""
    storage = exp.config.get("checkpoint_storage") or {}
    policy = {key: int(default if storage.get(key) is None else storage[key]) for key, default in GC_DEFAULTS.items()}
    policy.update(check_policy(overrides or {}))
    return policy


def check_policy(values: Any, field: str = "checkpoint_storage") -> Dict[str, int]:
    """GC settings given by a user: an object of non-negative integers under the three known keys.

    `field` prefixes the names in the problems (the body field they came from; "" for query parameters).
    """
    if not isinstance(values, Mapping):
        raise RequestProblem(400, "invalid GC policy",
                             [f"{field or 'policy'}: expected a JSON object with any of {', '.join(POLICY_KEYS)}"])
    prefix = f"{field}." if field else ""
    problems = []
    for key, value in values.items():
        if key not in GC_DEFAULTS:
            problems.append(f"{prefix}{key}: unknown GC setting; allowed: {', '.join(POLICY_KEYS)}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{prefix}{key}: expected a non-negative integer, got {value!r}")
    if problems:
        raise RequestProblem(400, "invalid GC policy", problems)
    return {str(k): int(v) for k, v in values.items()}


def checkpoints_to_delete(s: Session, exp: Experiment,
                          policy: Optional[Mapping[str, int]] = None) -> Tuple[List[Checkpoint], List[Checkpoint]]:
    """`(delete, keep)`: the experiment's COMPLETED checkpoints split by `policy` (default: its own), by id."""
    policy = gc_policy(exp) if policy is None else {**gc_policy(exp), **policy}
    ckpts = list(s.scalars(select(Checkpoint).where(Checkpoint.experiment_id == exp.id,
                                                    Checkpoint.state == states.COMPLETED).order_by(Checkpoint.id)))
    if not ckpts:
        return [], []
    rank = _ranking(s, exp, ckpts)
    keep = {c.uuid for c in sorted(ckpts, key=rank)[:policy["save_experiment_best"]]}
    by_trial: Dict[int, List[Checkpoint]] = {}
    for c in ckpts:
        by_trial.setdefault(c.trial_id, []).append(c)
    for trial_ckpts in by_trial.values():
        keep.update(c.uuid for c in sorted(trial_ckpts, key=rank)[:policy["save_trial_best"]])
        latest_first = sorted(trial_ckpts, key=lambda c: (-c.steps_completed, -c.id))
        keep.update(c.uuid for c in latest_first[:policy["save_trial_latest"]])
    keep |= model_registry.registered_uuids(s, [c.uuid for c in ckpts])
    keep |= warm_start_sources_in_use(s, [c.uuid for c in ckpts])
    return [c for c in ckpts if c.uuid not in keep], [c for c in ckpts if c.uuid in keep]


def warm_start_sources_in_use(s: Session, uuids: List[str]) -> Set[str]:
    """Those of `uuids` that an unfinished trial started from and still needs: it has no checkpoint of its own
    yet, so a restart would load that one again (a warm start of another experiment, a PBT clone)."""
    if not uuids:
        return set()
    own = select(Checkpoint.id).where(Checkpoint.trial_id == Trial.id, Checkpoint.state == states.COMPLETED).exists()
    query = select(Trial.warm_start_checkpoint_uuid).where(
        Trial.warm_start_checkpoint_uuid.in_(uuids), Trial.state.not_in(sorted(states.TRIAL_TERMINAL)), ~own)
    return {str(u) for u in s.scalars(query)}


def _ranking(s: Session, exp: Experiment, ckpts: List[Checkpoint]) -> Any:
    """A sort key putting the best checkpoint first (determined.common.checkpoint_order)."""
    metric = exp.config["searcher"]["metric"]
    smaller = bool(exp.config["searcher"].get("smaller_is_better", True))
    trial_ids = sorted({c.trial_id for c in ckpts})
    values: Dict[Tuple[int, int], Any] = {}
    rows = s.scalars(select(ValidationMetrics).where(ValidationMetrics.trial_id.in_(trial_ids))
                     .order_by(ValidationMetrics.id))
    for row in rows:  # a later row at the same steps wins (as the checkpoint's `validation_metrics` in the API)
        values[(row.trial_id, row.steps_completed)] = (row.metrics or {}).get(metric)

    def key(c: Checkpoint) -> checkpoint_order.CheckpointKey:
        value = values.get((c.trial_id, c.steps_completed))
        return checkpoint_order.checkpoint_key(value, smaller, c.steps_completed, c.trial_id, c.uuid)

    return key


def run_gc(master: "Master", experiment_id: int) -> List[str]:
    """Delete what the GC policy of an ended experiment does not keep; returns the uuids deleted.

    Only ids that are UUIDs are deleted, as `<storage dir>/<uuid>`, and only when the experiment's storage passes
    the master's checks (`Master.storage_refusal`: on a server, inside an allowed storage root, never the data
    dir; an allowed S3 endpoint, no credentials but the experiment's own: access.py). A file storage deletes
    only a real directory `<uuid>`, reached without following links (SharedFSStorageManager.delete). Files are deleted outside any database transaction, one checkpoint at a time under the master's lock
    (so no registration can slip in between the last check and the deletion); each row is marked DELETED
    only after its files are gone. A failed deletion is logged and leaves the row COMPLETED. An experiment
    that has not ended is left alone: its trials may still need their checkpoints.
    """
    with master.read() as s:
        exp = get_experiment(s, experiment_id)
        if exp.state not in states.EXPERIMENT_TERMINAL:
            return []
        candidates = [c.uuid for c in checkpoints_to_delete(s, exp)[0]]
        storage_config = exp.config.get("checkpoint_storage")
    deleted = delete_stored(master, experiment_id, storage_config, candidates, "checkpoint GC")
    with master.write() as s:
        exp = get_experiment(s, experiment_id)
        exp.checkpoint_gc_done = True
    if deleted:
        logger.info("experiment %s: checkpoint GC deleted %s checkpoint(s)", experiment_id, len(deleted))
    return deleted


def delete_stored(master: "Master", experiment_id: int, storage_config: Optional[Mapping[str, Any]],
                  uuids: List[str], who: str, *, raise_errors: bool = False) -> List[str]:
    """Delete the files of COMPLETED checkpoints `uuids` of one experiment and mark each row DELETED once its files
    are gone; returns the uuids deleted. A checkpoint registered in the model registry, or that an unfinished trial
    still starts from, is kept. Refusals and storage errors are logged (and raised as a RequestProblem with
    `raise_errors`, which a user's own deletion wants)."""
    def fail(message: str) -> None:
        logger.error("experiment %s: %s: %s", experiment_id, who, message)
        if raise_errors:
            raise RequestProblem(500 if "could not" in message else 400, message)

    deleted: List[str] = []
    refusal = master.storage_refusal(dict(storage_config or {})) if uuids else None
    if refusal:
        fail(f"nothing is deleted: {refusal}")
        return []
    if uuids:
        try:
            storage = storage_manager(master, storage_config)
        except Exception as e:
            fail(f"cannot reach the checkpoint storage: {e}")
            return []
    for uuid in uuids:
        if not is_checkpoint_uuid(uuid):  # recorded before ids had to be UUIDs: not a name to delete by
            fail(f"not deleting checkpoint {uuid!r}: its id is not a UUID; it stays COMPLETED")
            continue
        with master.lock:
            with master.read() as s:
                row = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
                if (row is None or row.state not in (states.COMPLETED, PARTIALLY_DELETED)
                        or model_registry.registered_uuids(s, [uuid]) or warm_start_sources_in_use(s, [uuid])):
                    continue
                state = row.state
            try:
                storage.delete(uuid)
            except LinkedCheckpoint as e:  # planted by a trial: refused, not a failure of the storage
                fail(f"{e}; it stays {state}")
                continue
            except Exception as e:
                fail(f"could not delete checkpoint {uuid} from storage ({e}); it stays {state}")
                continue
            with master.write() as s:
                row = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).one()
                row.state = states.DELETED
            deleted.append(uuid)
    return deleted


PARTIALLY_DELETED = "PARTIALLY_DELETED"  # some of its files removed by the user (Checkpoint.remove_files)


def run_pending_gc(master: "Master") -> List[int]:
    """Run GC for every ended experiment whose end has not been collected yet; returns their ids."""
    with master.read() as s:
        due = list(s.scalars(select(Experiment.id).where(
            Experiment.state.in_(sorted(states.EXPERIMENT_TERMINAL)),
            or_(Experiment.checkpoint_gc_done.is_(None), Experiment.checkpoint_gc_done.is_(False)),
        ).order_by(Experiment.id)))
    for experiment_id in due:
        run_gc(master, experiment_id)
    return due
