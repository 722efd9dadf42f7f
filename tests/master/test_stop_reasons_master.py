"""What `det e describe`, the UI and the logs say about a trial the search stopped: its own bracket's and rung's
facts (issue 34: a trial of bracket 1 was said to be "no better than the cutoff (the trial that went on)", a trial
of bracket 2), and a trial of an ERROR experiment that never used its restarts is not said to have used them."""
import pathlib
from typing import Any, Dict, Iterator

import pytest
from sqlalchemy.orm import Session

from determined.config import load_experiment_config
from determined.master.db import default_db_url, make_engine, upgrade
from determined.master.lifecycle import actions, allocations, experiment, protocol, states, trial_status
from determined.master.lifecycle.experiment import pending_operations, trials_of
from determined.master.scheduling import scheduler
from determined.master.views.dbread import reader_of


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    with Session(engine) as s:
        yield s
    engine.dispose()


def create(s: Session, searcher: Dict[str, Any], max_restarts: int = 1) -> Any:
    raw = {"entrypoint": "model:T", "searcher": {"metric": "validation_accuracy", **searcher},
           "max_restarts": max_restarts, "hyperparameters": {"global_batch_size": 4, "x": {"type": "const", "val": 1}},
           "reproducibility": {"experiment_seed": 1},
           "checkpoint_storage": {"type": "shared_fs", "host_path": "/tmp", "storage_path": "c"}}
    return actions.create_experiment(s, load_experiment_config(raw), b"")


def run_to_the_end(s: Session, exp: Any, accuracy: Any) -> None:
    """Run the experiment's trials one at a time as the fake trial would: train, validate, complete, exit."""
    for _ in range(1000):
        picked = scheduler.pick_trials(s, 1)
        if not picked:
            break
        trial = picked[0]
        allocations.start_allocation(s, trial)
        while pending_operations(s, trial.id):
            length = pending_operations(s, trial.id)[0].length_batches
            value = accuracy(trial.id, length)
            protocol.report_validation(s, trial, {"steps_completed": length, "metrics": {"validation_accuracy": value}})
            protocol.complete_operation(s, trial, {"length": length, "metric": value})
            if not pending_operations(s, trial.id) and not trial.close_requested:
                break  # waits for a promotion: give the slot back
        allocations.process_exited(s, trial.id, trial.allocation_id, 0, master_stopping=not trial.close_requested)
        s.flush()
    assert exp.state in states.EXPERIMENT_TERMINAL, exp.state


def test_a_stop_reason_speaks_of_the_trials_own_bracket_and_rung(session: Session) -> None:
    # bracket 1: rungs at 125, 500, 2000 batches; bracket 2: 500, 2000. Both have a rung at 500 batches.
    exp = create(session, {"name": "adaptive_asha", "max_length": {"batches": 2000}, "max_trials": 16, "divisor": 4,
                           "bracket_rungs": [3, 2], "smaller_is_better": False, "max_concurrent_trials": 16})
    # larger is better; bracket 2's trials (created last) are the worst, so any comparison with them is wrong
    run_to_the_end(session, exp, lambda tid, length: round(0.99 - tid * 0.001 + length * 1e-6, 6))
    trials = trials_of(session, exp.id)
    found = trial_status.statuses(reader_of(session), exp, trials)
    stopped = {t.id: found[t.id][1] for t in trials if found[t.id][0] == trial_status.STOPPED}
    assert stopped
    for reason in stopped.values():  # no cutoff taken from another bracket's trials
        assert "cutoff" not in reason and "the trial that went on" not in reason, reason
    method = experiment.load_searcher(exp).method
    for t in trials:
        if t.id not in stopped:
            continue
        reason = stopped[t.id]
        bracket = method.owner[t.request_id] + 1
        rungs = method.brackets[bracket - 1].rungs  # per rung: [request id, value, promoted]
        rung = max(i + 1 for i, entries in enumerate(rungs) if any(e[0] == t.request_id for e in entries))
        assert reason.startswith(f"stopped by the searcher at rung {rung} of bracket {bracket} "), reason
        entries = method.brackets[bracket - 1].rungs[rung - 1]
        assert f"; {len(entries)} reached it" in reason
    assert any("3 reached it, so it promoted none" in r for r in stopped.values()), stopped


def test_an_error_that_used_no_restart_does_not_say_it_used_them(session: Session) -> None:
    exp = create(session, {"name": "random", "max_length": {"batches": 1000}, "max_trials": 1}, max_restarts=1)
    [trial] = scheduler.pick_trials(session, 1)
    allocations.start_allocation(session, trial)
    protocol.early_exit(session, trial, {"reason": "ERRORED"})  # the trial cannot succeed as written
    allocations.process_exited(session, trial.id, trial.allocation_id, 1)
    assert trial.state == states.ERROR and trial.restarts == 0
    status, reason = trial_status.statuses(reader_of(session), exp, [trial])[trial.id]
    assert status == trial_status.ERROR
    assert "max_restarts" not in reason and "was not restarted" in reason, reason
    assert exp.state == states.ERROR and exp.progress < 1.0, exp.progress  # it trained nothing: not 100 %
    assert exp.progress == 0.0
