"""Trials that run their own loop (Determined 0.38): what their process's exit means, when the scheduler starts them,
and how a stop by the search method reaches them."""
import pathlib
from typing import Any, Dict, Iterator, List

import pytest
from sqlalchemy.orm import Session

from determined.config import load_experiment_config
from determined.master.lifecycle import actions, allocations, protocol, states
from determined.master.scheduling import scheduler
from determined.master.db import TrialLog, default_db_url, make_engine, upgrade
from determined.master.lifecycle.experiment import trials_of


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    with Session(engine) as s:
        yield s
    engine.dispose()


def experiment(s: Session, searcher: Dict[str, Any]) -> Any:
    raw = {"internal": {"native": {"command": ["train.py"]}},  # a script: its own loop decides its length
           "searcher": {"metric": "loss", **searcher}, "max_restarts": 1,
           "hyperparameters": {"x": {"type": "double", "minval": 0, "maxval": 1}},
           "reproducibility": {"experiment_seed": 1},
           "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp", "storage_path": "c"}}
    return actions.create_experiment(s, load_experiment_config(raw), b"")


def running(s: Session, exp_id: int) -> List[Any]:
    ids = [t.id for t in scheduler.pick_trials(s, 8)]
    for trial in trials_of(s, exp_id):
        if trial.id in ids:
            allocations.start_allocation(s, trial)
    return [t for t in trials_of(s, exp_id) if t.allocation_id]


def test_exit_zero_ends_the_trial_unless_it_acknowledged_a_preemption(session: Session) -> None:
    exp = experiment(session, {"name": "random", "max_trials": 3})
    a, b, c = running(session, exp.id)
    assert scheduler.idle_trials(session) == []  # no operations, yet never waiting for the search method
    allocations.process_exited(session, a.id, a.allocation_id, 0)  # done: exit 0
    assert a.state == states.COMPLETED
    exp = actions.pause(session, exp.id)
    assert b.preempt_requested and c.preempt_requested
    protocol.acknowledge_preemption(session, b.allocation_id)
    allocations.process_exited(session, b.id, b.allocation_id, 0)  # acknowledged: resumed later
    allocations.process_exited(session, c.id, c.allocation_id, 0)  # ignored the signal and finished: done
    assert (b.state, c.state) == (states.PAUSED, states.COMPLETED)
    actions.activate(session, exp.id)
    [again] = running(session, exp.id)
    assert again.id == b.id and not again.preempt_acked
    allocations.process_exited(session, b.id, b.allocation_id, 0)
    assert b.state == states.COMPLETED and exp.state == states.COMPLETED and exp.progress == 1.0


def test_a_stop_by_the_search_method_preempts_and_the_trial_ends_completed(session: Session) -> None:
    exp = experiment(session, {"name": "adaptive_asha", "max_trials": 3, "time_metric": "batches", "max_time": 4,
                               "divisor": 2, "mode": "aggressive", "max_concurrent_trials": 2})
    a, b = running(session, exp.id)
    # rungs at 2 and 4 batches
    protocol.report_validation(session, a, {"steps_completed": 2, "metrics": {"loss": 0.1, "batches": 2}})
    protocol.report_validation(session, b, {"steps_completed": 2, "metrics": {"loss": 0.9, "batches": 2}})
    assert b.close_requested and b.preempt_requested and not a.preempt_requested  # b is below the cutoff
    assert len(trials_of(session, exp.id)) == 3  # and replaced
    protocol.report_validation(session, b, {"steps_completed": 4, "metrics": {"loss": 0.0, "batches": 4}})
    assert exp.searcher_snapshot["method"]["brackets"][0]["rungs"][1] == []  # a stopped trial's report: ignored
    allocations.process_exited(session, b.id, b.allocation_id, 137)  # killed after the grace period: still done
    assert b.state == states.COMPLETED and b.restarts == 0
    # A report without the time metric is an error of the search: the experiment stops in ERROR.
    protocol.report_validation(session, a, {"steps_completed": 3, "metrics": {"loss": 0.1, "batches": "three"}})
    assert exp.state == states.STOPPING_ERROR and a.preempt_requested
    logs = [line.message for line in session.query(TrialLog).filter_by(trial_id=a.id)]
    assert any("'batches'" in line and "time_metric" in line for line in logs)


def test_a_trial_deletes_its_own_checkpoint(session: Session) -> None:
    """CheckpointContext.delete: the master marks the checkpoint DELETED (the latest one moves back); another trial's
    checkpoint is a 404, a registered one a 409."""
    import uuid as uuid_mod

    from determined.master.security import auth
    from determined.master.registry import model_registry
    from determined.master.problems import RequestProblem

    exp = experiment(session, {"name": "random", "max_trials": 2})
    a, b = running(session, exp.id)
    first, second = str(uuid_mod.uuid4()), str(uuid_mod.uuid4())
    for steps, uuid in ((4, first), (8, second)):
        protocol.report_checkpoint(session, a, {"uuid": uuid, "steps_completed": steps, "resources": {"w": 1}})
    assert a.latest_checkpoint_uuid == second
    with pytest.raises(RequestProblem) as other:
        protocol.delete_own_checkpoint(session, b, second)
    assert other.value.status == 404
    protocol.delete_own_checkpoint(session, a, second)
    assert a.latest_checkpoint_uuid == first
    admin = auth.Principal(username="admin", user_id=None, admin=True)
    model = model_registry.create_model(session, "m", {}, admin)
    model_registry.register_version(session, model, {"checkpoint_uuid": first}, admin)
    with pytest.raises(RequestProblem) as registered:
        protocol.delete_own_checkpoint(session, a, first)
    assert registered.value.status == 409 and a.latest_checkpoint_uuid == first
