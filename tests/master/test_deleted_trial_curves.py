"""A deleted experiment's learning curves are not served for a later trial that gets one of its trial ids (SQLite
gives a new row the largest id again once the rows above it are deleted)."""
from typing import Any, List, Tuple

from sqlalchemy import select

from determined.master.db import Trial
from determined.master.lifecycle import allocations, experiment, states

from ._helpers import config, model_def
from .test_curves_kept import _curves, _report, _start


def _new_experiment(app: Any, api: Any) -> Tuple[int, List[Tuple[int, str]]]:
    exp_id = api.post("/experiments", {"config": config(max_trials=2), "model_definition": model_def()})[
        "experiment"]["id"]
    with app.state.master.write() as s:
        runs = [(t.id, allocations.start_allocation(s, t)[1])
                for t in s.scalars(select(Trial).where(Trial.experiment_id == exp_id).order_by(Trial.id))]
    return exp_id, runs


def test_a_deleted_trials_curve_is_not_served_for_a_trial_that_reuses_its_id(tmp_path: Any) -> None:
    app, api = _start(tmp_path / "data")
    try:
        exp_id, runs = _new_experiment(app, api)
        for trial_id, token in runs:
            _report(api, trial_id, token, 1, 1.0)
        assert {t: c["training"][0]["metrics"]["loss"] for t, c in _curves(api, exp_id).items()} == {
            t: 1.0 for t, _ in runs}  # read once: cached in memory and kept
        with app.state.master.write() as s:  # ended (deletion needs that), without running anything
            exp = experiment.get_experiment(s, exp_id)
            exp.state = states.CANCELED
            for trial in experiment.trials_of(s, exp_id):
                trial.state, trial.allocation_id = states.CANCELED, None
        api.delete(f"/experiments/{exp_id}")
        exp2, runs2 = _new_experiment(app, api)
        for trial_id, token in runs2:
            _report(api, trial_id, token, 1, 2.0)
        assert {t: c["training"][0]["metrics"]["loss"] for t, c in _curves(api, exp2).items()} == {
            t: 2.0 for t, _ in runs2}
    finally:
        app.state.master.stop()
