"""A stop reason is computed when the search method closes the trial and stored with its snapshot
(trial_status.keep_stop_reasons), so that a read (`det e describe`, the UI, the logs) neither imports nor restores
the search method (benchmarks/cli_latency.py: describe was 1.5x `det --help`), and says word for word what the
method restored from its snapshot says (an experiment from before reasons were stored still reads it that way)."""
import os
import subprocess
import sys
import uuid
from typing import Any, Callable, Dict

import pytest
from sqlalchemy.orm import Session

from determined.master import embedded
from determined.master.lifecycle import allocations, protocol, states, trial_status
from determined.master.lifecycle.experiment import pending_operations, trials_of
from determined.master.scheduling import scheduler
from determined.master.views.dbread import reader_of
from determined.searcher import ASHAStoppingSearch, Close, Create, SearchContext
from tests import _postgres

from ._helpers import model_def
from .test_stop_reasons_master import create, session  # noqa: F401 - the fixture

SEARCHES = {
    "adaptive_asha": {"name": "adaptive_asha", "max_length": {"batches": 2000}, "max_trials": 16, "divisor": 4,
                      "bracket_rungs": [3, 2], "smaller_is_better": False, "max_concurrent_trials": 16},
    "adaptive_asha stop_once": {"name": "adaptive_asha", "max_length": {"batches": 800}, "max_trials": 8,
                                "divisor": 2, "stop_once": True, "max_concurrent_trials": 8},
    "adaptive": {"name": "adaptive", "max_length": {"batches": 1600}, "budget": {"batches": 16000}, "divisor": 4,
                 "bracket_rungs": [2, 1], "max_rungs": 2},
    "pbt": {"name": "pbt", "population_size": 4, "num_rounds": 3, "length_per_round": {"batches": 100},
            "replace_function": {"truncate_fraction": 0.5},
            "explore_function": {"resample_probability": 0.5, "perturb_factor": 0.2}},
}


def run_to_the_end(s: Session, exp: Any, accuracy: Callable[[int, int], float]) -> None:
    """Run the trials one at a time as a trial would: train, validate, checkpoint (PBT clones from it), complete."""
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
            protocol.report_checkpoint(s, trial, {"uuid": str(uuid.uuid4()), "steps_completed": length,
                                                  "resources": {"model.pt": 1}})
            protocol.complete_operation(s, trial, {"length": length, "metric": value})
            if not pending_operations(s, trial.id) and not trial.close_requested:
                break  # waits for a promotion: give the slot back
        allocations.process_exited(s, trial.id, trial.allocation_id, 0, master_stopping=not trial.close_requested)
        s.flush()
    assert exp.state in states.EXPERIMENT_TERMINAL, exp.state


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_a_stop_reason_is_stored_when_the_trial_is_closed_and_read_without_the_method(
        session: Session, name: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    exp = create(session, SEARCHES[name])
    run_to_the_end(session, exp, lambda tid, length: round(0.9 - (tid * 37 % 11) * 0.01 + length * 1e-6, 6))
    trials = trials_of(session, exp.id)
    stored = exp.searcher_snapshot[trial_status.STOP_REASONS]
    with monkeypatch.context() as patch:
        patch.setattr(trial_status, "_search_method", lambda exp: pytest.fail("the search method was restored"))
        read = trial_status.statuses(reader_of(session), exp, trials)
    stopped = {tid for tid, (status, _) in read.items() if status == trial_status.STOPPED}
    assert stopped and len(stored) >= len(stopped), (read, stored)
    # The same words as the method restored from its snapshot gives (how a snapshot without them is read).
    snapshot = dict(exp.searcher_snapshot)
    del snapshot[trial_status.STOP_REASONS]
    exp.searcher_snapshot = snapshot
    assert trial_status.statuses(reader_of(session), exp, trials) == read


def test_stopping_asha_stores_both_a_stop_and_the_top_rung() -> None:
    method = ASHAStoppingSearch(bracket_rungs=[2], max_time=4, max_trials=3, time_metric="batches", metric="loss",
                                divisor=2, max_concurrent_trials=2, smaller_is_better=False)
    config = {"searcher": {"name": "adaptive_asha", "metric": "accuracy", "smaller_is_better": False}}
    ctx = SearchContext(0, {"x": {"type": "double", "minval": 0, "maxval": 1}})
    a, b = [op.request_id for op in method.initial_operations(ctx) if isinstance(op, Create)]
    ops = method.on_validation_reported(ctx, a, {"loss": 0.9, "batches": 2})
    ops += method.on_validation_reported(ctx, b, {"loss": 0.4, "batches": 2})
    ops += method.on_validation_reported(ctx, a, {"loss": 0.95, "batches": 4})
    snapshot: Dict[str, Any] = {}
    trial_status.keep_stop_reasons(snapshot, None, method, config, [op.request_id for op in ops if isinstance(op, Close)])
    assert snapshot[trial_status.STOP_REASONS] == {
        a: [trial_status.REACHED_TOP, "reached the top rung (4 batches) and was done"],
        b: [trial_status.STOPPED_EARLY, "stopped by the searcher at rung 1 (2 batches): rung 1 lets a trial go on when "
            "its result ranks in the top max(1, floor(n / 2)) of the n results there when it reports; 2 had reported "
            "(this one included), so the top 1 went on; its accuracy 0.4 at batches 2 ranked 2nd (the 1st best: 0.9)"]}
    later: Dict[str, Any] = {}  # a later snapshot keeps them; one from before they were stored gets none
    trial_status.keep_stop_reasons(later, snapshot, method, config, [])
    assert later[trial_status.STOP_REASONS] == snapshot[trial_status.STOP_REASONS]
    old: Dict[str, Any] = {}
    trial_status.keep_stop_reasons(old, {"method": {}}, method, config, [b])
    assert trial_status.STOP_REASONS not in old


PROBE = ("import sys, io, contextlib\nfrom determined.cli.main import main\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out):\n"
         "    code = main(sys.argv[1:])\n"
         "print(out.getvalue())\n"
         "print('SEARCHER IMPORTED', 'determined.searcher' in sys.modules)")


def test_describe_says_why_a_trial_stopped_without_importing_the_search_methods(tmp_path: Any) -> None:
    data_dir = tmp_path / "data"
    api = embedded.in_process_session(data_dir)
    config = {"entrypoint": "model:T", "max_restarts": 0, "hyperparameters": {"global_batch_size": 8},
              "searcher": {"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 40}, "max_trials": 4,
                           "divisor": 2, "max_rungs": 2, "max_concurrent_trials": 4}}
    exp = api.post("/experiments", {"config": config, "model_definition": model_def()})["experiment"]["id"]
    for _ in range(3):
        for trial in api.get(f"/experiments/{exp}")["trials"]:
            op = api.get(f"/trials/{trial['id']}/searcher/operation")
            if op.get("length"):
                loss = 0.1 * trial["id"]
                api.post(f"/trials/{trial['id']}/validation_metrics", {"steps_completed": op["length"],
                                                                       "metrics": {"loss": loss}})
                api.post(f"/trials/{trial['id']}/searcher/completed_operation", {"length": op["length"], "metric": loss})
    assert api.get(f"/experiments/{exp}")["experiment"]["state"] == "COMPLETED"
    api._client.app.state.master.stop()
    env = {**os.environ, "DET_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    for key in ("DET_MASTER", "DET_MASTER_ADDR", "DET_DB_URL", "DET_USER"):
        env.pop(key, None)
    db_url = _postgres.database_url_for_subprocesses(data_dir)  # DET_TEST_DB=postgres: the database the test wrote
    if db_url:
        env["DET_DB_URL"] = db_url
    proc = subprocess.run([sys.executable, "-c", PROBE, "experiment", "describe", str(exp)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "stopped by the searcher at rung 1" in proc.stdout, proc.stdout
    if db_url is None:  # the CLI's thin read path (SQLite); on PostgreSQL `det` reads through the in-process master
        assert proc.stdout.strip().splitlines()[-1] == "SEARCHER IMPORTED False", proc.stdout
