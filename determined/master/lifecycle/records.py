"""Finding stored experiments and trials by id (404 when missing), and a trial's seed."""
import hashlib

from sqlalchemy.orm import Session

from determined.master.db import Experiment, Trial
from determined.master.problems import not_found


def get_experiment(s: Session, experiment_id: int) -> Experiment:
    exp = s.get(Experiment, experiment_id)
    if exp is None:
        raise not_found("experiment", experiment_id)
    return exp


def get_trial(s: Session, trial_id: int) -> Trial:
    trial = s.get(Trial, trial_id)
    if trial is None:
        raise not_found("trial", trial_id)
    return trial


def trial_seed(experiment_seed: int, request_id: str) -> int:
    """A trial's seed, derived from the experiment seed and its request id (stable across restarts)."""
    digest = hashlib.sha256(f"{experiment_seed}:{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31)
