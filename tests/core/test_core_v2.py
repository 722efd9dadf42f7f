"""Determined 0.38's `determined.experimental.core_v2`: unmanaged runs recorded on the local data dir's master
(its API opened in this process), the master's rules for unmanaged experiments, and a managed run of a core_v2
script (an experiment's entrypoint, on `slots_per_trial: 0`). The runs against a real `det master up` are in
tests/server/test_unmanaged_server.py."""
import json
import pathlib
import subprocess
import sys
from typing import Any, Dict

import pytest

from determined import errors, master
from determined.common.api import Session
from determined.experimental import core_v2
from determined.master import embedded
from determined.master.scheduling import scheduler
from determined.master.rm import Slots
from tests.master._helpers import model_def

SCRIPT = pathlib.Path(__file__).with_name("_core_v2_script.py")


@pytest.fixture
def api(det_data_dir: pathlib.Path) -> Session:
    return embedded.in_process_session(det_data_dir)


def _train(context: Any, start: int, steps: int, w: float = 0.0) -> float:
    for step in range(start + 1, start + steps + 1):
        w += 0.5 * (3.0 - w)
        context.train.report_training_metrics(steps_completed=step, metrics={"loss": (3.0 - w) ** 2})
    context.train.report_validation_metrics(steps_completed=start + steps, metrics={"loss": (3.0 - w) ** 2})
    return w


def test_an_unmanaged_run_records_its_experiment_and_a_second_run_continues_its_trial(api: Session) -> None:
    config = core_v2.Config(name="unmanaged-local", hparams={"lr": 0.5}, labels=["a", "b"], description="d",
                            external_experiment_id="exp-A", external_trial_id="trial-1")
    core_v2.init(config=config)
    try:
        assert core_v2.info is not None and core_v2.train is not None and core_v2.checkpoint is not None
        first = core_v2.info
        assert first.latest_checkpoint is None and first.trial.hparams == {"lr": 0.5}
        assert first._trial_info is not None and first._trial_info.experiment_id == first.experiment_id
        w = _train(core_v2, 0, 4)
        with core_v2.checkpoint.store_path({"steps_completed": 4}) as (path, uuid1):
            (path / "w").write_text(repr(w))
        exp = api.get(f"/experiments/{first.experiment_id}")["experiment"]
        assert exp["state"] == "ACTIVE" and exp["unmanaged"] and exp["external_experiment_id"] == "exp-A"
        assert exp["owner"] == "determined" and exp["labels"] == ["a", "b"] and exp["name"] == "unmanaged-local"
        assert core_v2.url_reverse_webui_exp_view().endswith(f"/experiments/{first.experiment_id}")
    finally:
        core_v2.close()
    assert core_v2.train is None and core_v2.info is None
    exp = api.get(f"/experiments/{first.experiment_id}")["experiment"]
    assert exp["state"] == "COMPLETED" and exp["num_trials"] == 1

    with core_v2.init_context(config=config) as context:  # the same external ids: the same trial, continued
        assert (context.info.experiment_id, context.info.trial_id) == (first.experiment_id, first.trial_id)
        assert context.info.latest_checkpoint == uuid1 and context.info.steps_completed == 4
        assert context.info.trial_run_id == 2
        with context.checkpoint.restore_path(uuid1) as path:
            restored = float((path / "w").read_text())
        assert restored == w
        _train(context, 4, 4, restored)
    training = api.get(f"/trials/{first.trial_id}/metrics", params={"group": "training"})
    steps = [m["steps_completed"] for m in training["metrics"]]
    assert steps == list(range(1, 9))
    losses = [m["metrics"]["loss"] for m in training["metrics"]]
    assert losses[-1] < losses[0] / 100
    trial = api.get(f"/trials/{first.trial_id}")["trial"]
    assert trial["state"] == "COMPLETED" and trial["external_trial_id"] == "trial-1"

    with core_v2.init_context(config=core_v2.Config(name="second", external_experiment_id="exp-A")) as context:
        assert context.info.experiment_id == first.experiment_id and context.info.trial_id != first.trial_id
        assert context.info.latest_checkpoint is None  # a new trial of the same experiment
    assert api.get(f"/experiments/{first.experiment_id}")["experiment"]["num_trials"] == 2


def test_a_run_that_raises_ends_its_trial_in_error_and_the_experiment_follows(api: Session) -> None:
    with pytest.raises(ZeroDivisionError):
        with core_v2.init_context(config=core_v2.Config(name="fails")) as context:
            context.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
            1 / 0
    trial = api.get(f"/trials/{context.info.trial_id}")["trial"]
    assert trial["state"] == "ERROR"
    assert api.get(f"/experiments/{context.info.experiment_id}")["experiment"]["state"] == "ERROR"


def test_the_master_never_schedules_pauses_or_continues_an_unmanaged_experiment(api: Session,
                                                                                det_data_dir: pathlib.Path) -> None:
    context = core_v2.init_context(config=core_v2.Config(name="running"))
    try:
        exp_id = context.info.experiment_id
        app_master = master.create_app(det_data_dir, run_scheduler=False).state.master
        with app_master.write() as s:
            assert scheduler.pick_trials(s, 8, 8) == []
        for action in ("pause", "activate"):
            with pytest.raises(errors.APIError, match="unmanaged"):
                api.post(f"/experiments/{exp_id}/{action}")
        api.post(f"/experiments/{exp_id}/kill")
        assert api.get(f"/experiments/{exp_id}")["experiment"]["state"] == "CANCELED"
        assert api.get(f"/trials/{context.info.trial_id}")["trial"]["state"] == "CANCELED"
        with pytest.raises(errors.APIError, match="unmanaged"):
            api.post(f"/experiments/{exp_id}/continue", {})
    finally:
        context.close()  # the run's end does not undo the kill
    assert api.get(f"/trials/{context.info.trial_id}")["trial"]["state"] == "CANCELED"
    assert api.get(f"/experiments/{context.info.experiment_id}")["experiment"]["state"] == "CANCELED"


def test_bad_configs_and_requests_are_refused_with_the_field_named(api: Session) -> None:
    with pytest.raises(errors.DeterminedError, match="external_trial_id: needs external_experiment_id"):
        core_v2.init_context(config=core_v2.Config(name="x", external_trial_id="t"))
    with pytest.raises(errors.DeterminedError, match="labels: expected a list of strings"):
        core_v2.init_context(config=core_v2.Config(name="x", labels="a"))  # type: ignore[arg-type]
    with pytest.raises(errors.DeterminedError, match="give config=core_v2.Config"):
        core_v2.init_context()
    with pytest.raises(errors.DeterminedError, match="refused the unmanaged experiment.*(?s:workspace)"):
        core_v2.init_context(config=core_v2.Config(name="x", workspace="nowhere", project="none"))
    with pytest.raises(errors.DeterminedError, match="external_experiment_id"):
        core_v2.init_context(config=core_v2.Config(name="x", external_experiment_id="bad id with spaces"))
    with pytest.warns(FutureWarning):
        defaults = core_v2.DefaultConfig(name="old-style", hparams={"a": 1})
    with pytest.warns(FutureWarning):
        with core_v2.init_context(defaults=defaults) as context:
            assert context.info.trial.hparams == {"a": 1}
    managed = api.post("/experiments", {"config": {"name": "m", "entrypoint": "python3 x.py",
                                                   "searcher": {"name": "single", "metric": "x"}},
                                        "model_definition": model_def({"x.py": ""}), "activate": False})
    with pytest.raises(errors.APIError, match="not unmanaged"):
        api.post("/trials", {"experiment_id": managed["experiment"]["id"], "unmanaged": True})
    with pytest.raises(errors.APIError, match="unmanaged: must be true"):
        api.post("/trials", {"experiment_id": 1})
    with pytest.raises(errors.APIError, match="state: expected one of"):
        api.patch(f"/trials/{context.info.trial_id}", {"state": "SLEEPING"})
    with pytest.raises(errors.APIError, match="hparams: expected an object"):
        api.post("/trials", {"experiment_id": context.info.experiment_id, "unmanaged": True, "hparams": [1]})


@pytest.mark.slow
def test_a_core_v2_script_runs_as_a_managed_experiment_on_zero_slots(tmp_path: pathlib.Path) -> None:
    """The same script, as an experiment's entrypoint: core_v2.init is core.init there (the Config is ignored:
    the experiment's hyperparameters rule), and `slots_per_trial: 0` gives it no slot."""
    running = master.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=1), preemption_timeout=20)
    try:
        session = running.session()
        config = {"name": "managed-core-v2", "entrypoint": "python3 _core_v2_script.py", "max_restarts": 0,
                  "searcher": {"name": "single", "metric": "loss"}, "hyperparameters": {"lr": 1.0, "steps": 10},
                  "resources": {"slots_per_trial": 0}}
        exp_id = session.post("/experiments", {"config": config, "model_definition": model_def(
            {"_core_v2_script.py": SCRIPT.read_text()})})["experiment"]["id"]
        from tests.e2e._helpers import wait_for

        wait_for(lambda: session.get(f"/experiments/{exp_id}")["experiment"]["state"] in ("COMPLETED", "ERROR"),
                 90, 0.2, what="the experiment to end")
        exp = session.get(f"/experiments/{exp_id}")["experiment"]
        logs = [e["message"] for e in session.get("/trials/1/logs", params={"limit": 1000})["logs"]]
        assert exp["state"] == "COMPLETED", logs
        result: Dict[str, Any] = json.loads(next(line for line in logs if "RESULT " in line).split("RESULT ", 1)[1])
        assert result["slot_ids"] == [] and result["experiment_id"] == exp_id and not exp["unmanaged"]
        assert result["last_loss"] < result["first_loss"] / 10 and abs(result["w"] - 3) < 0.1
        validation = session.get("/trials/1/metrics", params={"group": "validation"})["metrics"]
        assert [v["steps_completed"] for v in validation] == [10]
        assert session.get("/trials/1")["trial"]["latest_checkpoint_uuid"] == result["checkpoint"]
    finally:
        running.stop()


def test_python_script_py_outside_the_platform_reports_to_the_data_dir(tmp_path: pathlib.Path,
                                                                       det_data_dir: pathlib.Path,
                                                                       api: Session) -> None:
    """`python script.py` with no master: the unmanaged experiment goes to the data dir, as `det` commands see."""
    env = {"CORE_V2_EXPERIMENT": "local-exp", "CORE_V2_TRIAL": "local-trial"}
    import os

    out = subprocess.run([sys.executable, str(SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.split("RESULT ", 1)[1])
    listed = subprocess.run([str(pathlib.Path(sys.executable).with_name("det")), "experiment", "list"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "core-v2-script" in listed.stdout and "COMPLETED" in listed.stdout
    trial = api.get(f"/trials/{result['trial_id']}")["trial"]
    assert trial["latest_checkpoint_uuid"] == result["checkpoint"] and trial["total_batches"] == 20
