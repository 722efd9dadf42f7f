"""A `searcher.metric` the trials do not report (issue 34: `val_accuracy` for a trial reporting
`validation_accuracy` was found only after every trial trained and failed `max_restarts` times): the first
validation ends the search with the reason, naming the metric asked for and the ones reported; no trial is
restarted and no new one created; the experiment ends ERROR with its progress short of 100 %."""
import pathlib
from typing import Any, Dict, Iterator

import pytest
from sqlalchemy.orm import Session

from determined.config import load_experiment_config
from determined.master.db import default_db_url, make_engine, upgrade
from determined.master.lifecycle import actions, allocations, protocol, states, trial_status
from determined.master.lifecycle.experiment import trials_of
from determined.master.scheduling import scheduler
from determined.master.views.dbread import reader_of


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    with Session(engine) as s:
        yield s
    engine.dispose()


def create(s: Session, entrypoint: Any) -> Any:
    raw: Dict[str, Any] = {
        "entrypoint": entrypoint, "max_restarts": 3,
        "searcher": {"name": "random", "metric": "val_accuracy", "smaller_is_better": False, "max_trials": 4,
                     "max_length": {"batches": 100}, "max_concurrent_trials": 2},
        "hyperparameters": {"global_batch_size": 4, "x": {"type": "double", "minval": 0, "maxval": 1}},
        "reproducibility": {"experiment_seed": 1},
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp", "storage_path": "c"}}
    return actions.create_experiment(s, load_experiment_config(raw), b"")


def test_the_first_validation_without_the_metric_ends_the_search_with_the_reason(session: Session) -> None:
    exp = create(session, "model:MyTrial")
    trial = scheduler.pick_trials(session, 1)[0]
    allocations.start_allocation(session, trial)
    protocol.report_validation(session, trial, {"steps_completed": 100,
                                                "metrics": {"validation_accuracy": 0.9, "validation_loss": 0.3}})
    session.flush()
    assert exp.searcher_shutdown and exp.searcher_failure
    # the trial's loop then refuses the validation itself: its process fails, and it is not restarted
    allocations.process_exited(session, trial.id, trial.allocation_id, 1)
    session.flush()
    assert trial.state == states.ERROR and trial.restarts == 0
    assert scheduler.pick_trials(session, 4) == []  # nothing more runs or starts
    assert exp.state == states.ERROR and exp.progress < 1.0
    statuses = trial_status.statuses(reader_of(session), exp, trials_of(session, exp.id))
    status, reason = statuses[trial.id]
    assert "'val_accuracy'" in reason and "validation_accuracy, validation_loss" in reason, reason
    assert "max_restarts" not in reason, reason


def test_a_script_s_validation_without_the_metric_is_stored_as_determined_did(session: Session) -> None:
    """A Core API script may validate without the searcher metric and report it with the completed operation."""
    exp = create(session, "python3 train.py")
    trial = scheduler.pick_trials(session, 1)[0]
    allocations.start_allocation(session, trial)
    assert protocol.report_validation(session, trial, {"steps_completed": 100, "metrics": {"other": 1.0}}) == {
        "is_best": False}
    assert not exp.searcher_shutdown and exp.state == states.ACTIVE
