"""The `det` CLI end to end: real experiments of the digits example on the embedded master."""
import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from tests.e2e._helpers import EXAMPLE, copy_example, det, det_json, harness_pids, in_process, small_config, wait_for

pytestmark = pytest.mark.slow


def test_random_search_end_to_end(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    cfg = small_config(
        tmp_path,
        searcher={"max_trials": 2, "max_length": {"batches": 60}},
        min_validation_period={"batches": 30},
        # Learning rates that learn in 60 batches: at 1e-4 both trials can stay near chance (seen: 0.26).
        hyperparameters={"learning_rate": {"type": "log", "base": 10, "minval": -2.5, "maxval": -2}},
    )
    proc = det("experiment", "create", str(cfg), str(EXAMPLE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Created experiment 1" in proc.stdout
    assert "Best checkpoint:" in proc.stdout

    [exp] = det_json("experiment", "list")
    assert exp["id"] == 1 and exp["state"] == "COMPLETED"
    desc = det_json("experiment", "describe", "1")
    assert len(desc["trials"]) == 2
    assert {t["state"] for t in desc["trials"]} == {"COMPLETED"}
    assert all(t["total_batches"] == 60 for t in desc["trials"])
    assert desc["best_validation"] is not None and desc["best_validation"] > 0.5

    trial = det_json("trial", "describe", str(desc["trials"][0]["id"]))
    assert [v["steps_completed"] for v in trial["validation_metrics"]] == [30, 60]
    assert "validation_accuracy" in trial["validation_metrics"][-1]["metrics"]
    assert set(trial["hparams"]) >= {"learning_rate", "global_batch_size"}
    assert trial["checkpoints"], "a completed trial has at least one checkpoint"

    logs = in_process.det("trial", "logs", str(trial["id"]), check=True).stdout
    assert logs.strip(), "trial logs were captured"

    uuid = trial["checkpoints"][-1]["uuid"]
    ckpt = det_json("checkpoint", "describe", uuid)
    assert ckpt["state"] == "COMPLETED" and ckpt["trial_id"] == trial["id"]
    ckpt_dir = det_data_dir / "checkpoints" / uuid
    assert ckpt_dir.is_dir()
    for rel, size in ckpt["resources"].items():
        assert (ckpt_dir / rel).stat().st_size == size


def test_bad_config_is_rejected_and_nothing_stored(tmp_path: pathlib.Path) -> None:
    cfg = small_config(tmp_path, searcher={"max_length": {"batches": 10, "epochs": 1}, "max_trials": 0})
    proc = det("experiment", "create", str(cfg), str(EXAMPLE))
    assert proc.returncode == 1
    assert "searcher.max_length" in proc.stderr
    assert "searcher.max_trials" in proc.stderr, "every problem is listed at once"
    assert "Traceback" not in proc.stderr
    assert det_json("experiment", "list") == []


def test_missing_entrypoint_class_is_rejected(tmp_path: pathlib.Path) -> None:
    cfg = small_config(tmp_path, entrypoint="model_def:NoSuchTrial")
    proc = det("experiment", "create", str(cfg), str(EXAMPLE))
    assert proc.returncode == 1
    assert "NoSuchTrial" in proc.stderr and "Traceback" not in proc.stderr
    assert det_json("experiment", "list") == []


def test_local_test_mode_stores_nothing(tmp_path: pathlib.Path) -> None:
    proc = det("experiment", "create", str(EXAMPLE / "const.yaml"), str(EXAMPLE), "--local", "--test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Local test mode passed" in proc.stdout
    assert det_json("experiment", "list") == []


def _default_sigint() -> None:
    # A test run started in the background of a script inherits SIGINT ignored; `det` must see Ctrl-C as from
    # a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(cfg: pathlib.Path, model: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "determined", "experiment", "create", str(cfg), str(model)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        preexec_fn=_default_sigint,
    )


def _trial(exp_id: int = 1) -> dict:
    """The first trial of an experiment, or {} while the experiment or its trial does not exist yet.

    Read in this process (no Python start per poll), so the waits below notice a change at once."""
    proc = in_process.det("experiment", "describe", str(exp_id), "--json")
    if proc.returncode != 0:
        return {}
    trials = json.loads(proc.stdout)["trials"]
    return det_json("trial", "describe", str(trials[0]["id"])) if trials else {}


def test_sigkilled_trial_restarts_from_checkpoint(tmp_path: pathlib.Path) -> None:
    cfg = small_config(
        tmp_path, "const.yaml",
        searcher={"max_length": {"batches": 2000}},
        min_checkpoint_period={"batches": 250},
        min_validation_period={"batches": 500},
        scheduling_unit=50,
    )
    proc = _start(cfg, EXAMPLE)
    try:
        [pid] = wait_for(lambda: harness_pids(1), timeout=180, what="trial process")
        ckpts = wait_for(lambda: _trial().get("checkpoints"), timeout=180, what="a first checkpoint")
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    trial = _trial()
    assert trial["state"] == "COMPLETED"
    assert trial["restarts"] == 1
    assert trial["total_batches"] == 2000
    assert ckpts[0]["steps_completed"] < 2000, "the kill happened mid-training"
    steps = [m["steps_completed"] for m in trial["training_metrics"]]
    assert steps == sorted(set(steps)), "no training metric is duplicated by the restart"
    assert [v["steps_completed"] for v in trial["validation_metrics"]] == [500, 1000, 1500, 2000]


def test_ctrl_c_pauses_and_activate_resumes(tmp_path: pathlib.Path) -> None:
    # The example's trial with 10 ms of sleep per batch: 800 batches take at least 8 s however fast the machine,
    # and the pause lands a second or two after the first report.
    model = copy_example(tmp_path)
    (model / "slow_def.py").write_text(
        "import time\n\nfrom model_def import DigitsTrial\n\n\n"
        "class SlowDigitsTrial(DigitsTrial):\n"
        "    def train_batch(self, batch, epoch_idx, batch_idx):\n"
        "        time.sleep(0.01)\n"
        "        return super().train_batch(batch, epoch_idx, batch_idx)\n")
    cfg = small_config(
        tmp_path, "const.yaml",
        entrypoint="slow_def:SlowDigitsTrial",
        searcher={"max_length": {"batches": 800}},
        min_validation_period={"batches": 400},
        scheduling_unit=10,
    )
    proc = _start(cfg, model)
    try:
        wait_for(lambda: _trial().get("training_metrics"), timeout=180, what="training to start")
        print(f"Ctrl-C at batch {_trial().get('total_batches')} of 800")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "det experiment activate 1" in out
    [exp] = det_json("experiment", "list")
    assert exp["state"] == "PAUSED"
    paused = _trial()
    assert paused["checkpoints"], "pausing checkpoints first"
    print(f"paused at batch {paused['checkpoints'][-1]['steps_completed']} of 800")
    assert 0 < paused["checkpoints"][-1]["steps_completed"] < 800
    assert harness_pids(1) == []

    done = det("experiment", "activate", "1", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    trial = _trial()
    assert trial["state"] == "COMPLETED" and trial["total_batches"] == 800
    assert trial["restarts"] == 0, "a pause is not a failure"


def test_missing_searcher_metric_fails_fast_with_the_reported_metrics(tmp_path: pathlib.Path) -> None:
    cfg = small_config(tmp_path, "const.yaml", searcher={"metric": "val_acc", "max_length": {"batches": 20}},
                       max_restarts=3)
    proc = det("experiment", "create", str(cfg), str(EXAMPLE))
    assert proc.returncode == 1
    assert "the end of its logs" in proc.stdout
    assert "'val_acc'" in proc.stdout and "validation_accuracy, validation_loss" in proc.stdout
    trial = _trial()
    assert trial["state"] == "ERROR"
    assert trial["restarts"] == 0, "an error that a restart cannot fix is not retried"
