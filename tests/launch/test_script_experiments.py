"""Script entrypoints on the platform: real experiments on an embedded master (local resource manager, real
harness), running the scripts of tests/launch/scripts as a Determined 0.38 user's entrypoint would."""
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from determined import master
from determined.common.api import Session
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.master._helpers import model_def

SCRIPTS = pathlib.Path(__file__).with_name("scripts")
DET = str(pathlib.Path(sys.executable).with_name("det"))
TERMINAL = ("COMPLETED", "CANCELED", "ERROR")


def files(*names: str) -> Dict[str, str]:
    return {name: (SCRIPTS / name).read_text() for name in names}


def logs(session: Session, trial_id: int) -> List[str]:
    return [entry["message"] for entry in session.get(f"/trials/{trial_id}/logs", params={"limit": 10000})["logs"]]


def ended(session: Session, exp_id: int, timeout: float = 90) -> Dict[str, Any]:
    wait_for(lambda: session.get(f"/experiments/{exp_id}")["experiment"]["state"] in TERMINAL, timeout,
             0.1, what=f"experiment {exp_id} to end")
    return dict(session.get(f"/experiments/{exp_id}"))


def submit(session: Session, config: Dict[str, Any], model: Dict[str, str]) -> int:
    config = {"searcher": {"name": "single", "metric": "loss", "max_length": 1}, "max_restarts": 0, **config}
    return int(session.post("/experiments", {"config": config, "model_definition": model_def(model)})
               ["experiment"]["id"])


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, Dict[str, int]]]:
    """An embedded master running the real harness, with every experiment of this module submitted at once
    (they run side by side on its 8 CPU slots)."""
    embedded = master.start(tmp_path_factory.mktemp("scripts") / "data", slots=Slots(gpus=[], cpu_count=8),
                            preemption_timeout=20)
    session = embedded.session()
    check = files("check.py")
    experiments = {
        "listed": submit(session, {"entrypoint": ["python3", "check.py", "an argument", "--flag"],
                                   "hyperparameters": {"status": 0, "nested": {"a": 1}},
                                   "environment": {"environment_variables": ["FROM_CONFIG=config"]}},
                         {**check, "startup-hook.sh": "export FROM_HOOK=\"hook saw $FROM_CONFIG\"\n"}),
        "failing": submit(session, {"entrypoint": "echo shell sees trial $DET_TRIAL_ID && python3 check.py",
                                    "hyperparameters": {"status": 3}, "max_restarts": 1}, check),
        "sigterm": submit(session, {"entrypoint": "python3 check.py", "hyperparameters": {"wait_for_sigterm": True}},
                          check),
        "pause_timeout": submit(session, {"entrypoint": "python3 check.py", "preemption_timeout": 2,
                                          "hyperparameters": {"wait_for_sigterm": True}}, check),
        "ranks": submit(session, {"entrypoint": "python3 -m determined.launch.torch_distributed python3 ranks.py",
                                  "hyperparameters": {"steps": 30, "die_at": 15},
                                  "resources": {"slots_per_trial": 2}, "max_restarts": 1}, files("ranks.py")),
    }
    if importlib.util.find_spec("torch") is not None:
        experiments["ddp"] = submit(session, {
            "entrypoint": "python3 -m determined.launch.torch_distributed python3 ddp.py",
            "hyperparameters": {"steps": 30}, "resources": {"slots_per_trial": 2}}, files("ddp.py"))
    try:
        yield session, experiments
    finally:
        embedded.stop(timeout=10)


def test_commands_run_in_the_model_dir_with_the_trials_interpreter_and_environment(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    """A list is run as is, a string under `sh -c`; exit 0 completes the trial, another status is a failure
    that restarts the trial up to max_restarts."""
    session, experiments = platform
    done, failed = ended(session, experiments["listed"]), ended(session, experiments["failing"])
    assert done["experiment"]["state"] == "COMPLETED" and done["trials"][0]["state"] == "COMPLETED"
    # the script ended before the searcher's length: its status says so (not "trained the full length")
    assert done["trials"][0]["status_reason"].startswith("its process ended after 0 batches, before the 1 ")
    trial_id = done["trials"][0]["id"]
    text = "\n".join(logs(session, trial_id))
    assert (f"check: interpreter {sys.executable} args ['an argument', '--flag'] files ['check.py', "
            "'startup-hook.sh']") in text
    assert (f"check: DET_TRIAL_ID={trial_id} DET_EXPERIMENT_ID={experiments['listed']} DET_SLOT_IDS=[" in text
            and ' DET_TASK_TYPE=TRIAL DET_HPARAMS={"status": 0, "nested": {"a": 1}} DET_STEPS_COMPLETED=0 '
            'FROM_CONFIG=config FROM_HOOK=hook saw config' in text)  # the startup hook ran first
    assert failed["experiment"]["state"] == "ERROR"
    [trial] = failed["trials"]
    assert trial["state"] == "ERROR" and trial["restarts"] == 1
    lines = logs(session, trial["id"])
    assert f"shell sees trial {trial['id']}" in lines
    runs = [line.split(" run ")[1].split()[0] for line in lines if line.startswith(f"check: trial {trial['id']} ")]
    assert runs == ["1", "2"]  # DET_TRIAL_RUN_ID counts the runs
    assert any("the entrypoint command exited with status 3" in line for line in lines)
    assert any("failed with exit code 3; restart 1 of 1" in line for line in lines)


def test_a_killed_script_gets_sigterm(platform: Tuple[Session, Dict[str, int]]) -> None:
    session, experiments = platform
    exp_id = experiments["sigterm"]
    trial_id = wait_for(lambda: (session.get(f"/experiments/{exp_id}")["trials"] or [None])[0], 30, 0.1,
                        what="a trial")["id"]
    wait_for(lambda: "check: waiting for SIGTERM" in logs(session, trial_id), 60, 0.1, what="the script to wait")
    session.post(f"/experiments/{exp_id}/kill")
    assert ended(session, exp_id, 30)["experiment"]["state"] == "CANCELED"
    assert "check: got SIGTERM" in logs(session, trial_id)


def test_a_paused_script_that_ignores_the_preemption_signal_gets_sigterm_after_preemption_timeout(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    """Pause raises the preemption signal; a script that does not exit within the experiment's
    preemption_timeout gets SIGTERM (then SIGKILL after a grace), and its run ends as a pause, not a failure."""
    session, experiments = platform
    exp_id = experiments["pause_timeout"]
    trial_id = wait_for(lambda: (session.get(f"/experiments/{exp_id}")["trials"] or [None])[0], 30, 0.1,
                        what="a trial")["id"]
    wait_for(lambda: "check: waiting for SIGTERM" in logs(session, trial_id), 60, 0.1, what="the script to wait")
    session.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "PAUSED", 30, 0.1,
             what="the experiment to pause")
    desc = session.get(f"/experiments/{exp_id}")
    wait_for(lambda: "check: got SIGTERM" in logs(session, trial_id), 10, 0.1, what="the script's last line")
    assert desc["trials"][0]["state"] != "ERROR" and desc["trials"][0]["restarts"] == 0
    session.post(f"/experiments/{exp_id}/kill")


def test_a_worker_killed_mid_run_restarts_the_trial_from_its_checkpoint(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    session, experiments = platform
    desc = ended(session, experiments["ranks"], 120)
    [trial] = desc["trials"]
    lines = logs(session, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED" and trial["restarts"] == 1, "\n".join(lines[-40:])
    for rank in (0, 1):
        assert lines.count(f"[rank={rank}] ranks: rank {rank} of 2 allgather [0, 1]") == 2  # both runs
    assert "[rank=1] ranks: rank 1 dies" in lines
    # the launcher names the rank that died first (rank 0 may have failed on its dead peer by the time it looks)
    assert any("rank 1 exited with status 137; stopping rank(s)" in line for line in lines)
    resumed = [line for line in lines if "resumed from" in line]
    assert len(resumed) == 2 and all(line.endswith("at step 10") for line in resumed)
    steps = [m["steps_completed"] for m in session.get(f"/trials/{trial['id']}")["training_metrics"]]
    assert steps == [10, 20, 30]


def test_torch_distributed_ranks_see_their_rank_and_gather_each_other(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    pytest.importorskip("torch")
    session, experiments = platform
    desc = ended(session, experiments["ddp"], 180)
    [trial] = desc["trials"]
    lines = logs(session, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED", "\n".join(lines[-40:])
    for rank in (0, 1):
        assert f"[rank={rank}] ddp: rank {rank} of 2 local_rank {rank} gathered [0, 1]" in lines
        assert f"[rank={rank}] ddp: rank {rank} core allgather [0, 1]" in lines
    losses = [m["metrics"]["loss"] for m in session.get(f"/trials/{trial['id']}")["training_metrics"]]
    assert len(losses) == 3 and losses[-1] < losses[0] / 10


def test_ctrl_c_pauses_a_foreground_script_and_activate_resumes_it_from_its_checkpoint(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "regression.py").write_text((SCRIPTS / "regression.py").read_text())
    config = tmp_path / "const.yaml"
    config.write_text("entrypoint: python3 regression.py 60\nhyperparameters: {lr: 0.3, sleep: 0.05}\n"
                      "searcher: {name: single, metric: loss, max_length: 60}\n")
    env = dict(os.environ, DET_DATA_DIR=str(tmp_path / "data"))
    first = subprocess.Popen([DET, "experiment", "create", str(config), str(model)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = wait_for(lambda: master.running_master_url(tmp_path / "data", wait=0), 60, 0.1,
                       what="the foreground master")
        session = Session(url)

        def checkpointed() -> bool:
            if not session.get("/experiments")["experiments"]:
                return False
            return bool((session.get("/experiments/1")["trials"] or [{}])[0].get("latest_checkpoint_uuid"))
        wait_for(checkpointed, 60, 0.1, what="a first checkpoint")
        first.send_signal(signal.SIGINT)  # Ctrl-C
        out, _ = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0 and "Experiment 1 is paused; resume it with: det experiment activate 1" in out, out
    second = subprocess.run([DET, "experiment", "activate", "1"], env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    session = master.in_process_session(tmp_path / "data")
    desc = session.get("/experiments/1")
    [trial] = desc["trials"]
    assert desc["experiment"]["state"] == "COMPLETED" and trial["restarts"] == 0
    lines = logs(session, trial["id"])
    stopped = [line for line in lines if "the platform asked" in line]
    resumed = [line for line in lines if line.startswith("script: resumed from")]
    assert len(stopped) == 1 and len(resumed) == 1
    stop_step = int(stopped[0].split("at step ")[1].split(",")[0])
    assert resumed[0].endswith(f"at step {stop_step}") and 0 < stop_step < 60
    metrics = session.get(f"/trials/{trial['id']}")["training_metrics"]
    assert [m["steps_completed"] for m in metrics] == list(range(5, 65, 5))
    losses = [m["metrics"]["loss"] for m in metrics]
    assert losses[-1] < 0.05 < losses[0]  # it learned y = 3x + 1
