"""0.38's DeepSpeed Trainer API (`det.pytorch.deepspeed.init()` + `Trainer(trial, context).fit(...)`) on CPU slots:
the script of _ds_trainer_script.py runs as `python train.py` (trains, its loss falls, writes the Trainer's
checkpoint, and a second run resumes from a checkpoint to the very weights of the uninterrupted run), and as an
experiment's entrypoint on an embedded master: `python3 train.py` on one slot, paused and resumed to the weights of
an uninterrupted run, and `python3 -m determined.launch.deepspeed python3 train.py` on two slots. DeepSpeed runs
in processes of its own (its process group must not outlive a run)."""
import json
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from determined import master
from determined.common.api import Session
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.launch.test_script_experiments import ended, logs
from tests.master._helpers import model_def

from test_deepspeed_trial import needs_deepspeed

HERE = pathlib.Path(__file__).resolve().parent
MODEL = {"train.py": (HERE / "_ds_trainer_script.py").read_text(), "_ds_trials.py": (HERE / "_ds_trials.py").read_text()}
DIGEST = re.compile(r"train: final weights ([0-9a-f]{16})")


def _model_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    model = tmp_path / "model"
    model.mkdir()
    for name, text in MODEL.items():
        (model / name).write_text(text)
    return model


def _python(model: pathlib.Path, data_dir: pathlib.Path, *args: str) -> str:
    """Run `python ARGS...` in the model directory with no platform; its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["DET_DATA_DIR"] = str(data_dir)
    env.setdefault("OMP_NUM_THREADS", "1")  # as a trial's slot has; torch's default threads crawl on a busy machine
    out = subprocess.run([sys.executable, *args], cwd=model, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out.stdout + out.stderr


def _losses(record: pathlib.Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in (record / "losses-rank0.jsonl").read_text().splitlines()]


@needs_deepspeed
def test_python_train_py_trains_checkpoints_and_resumes_exactly(tmp_path: pathlib.Path) -> None:
    model, data = _model_dir(tmp_path), tmp_path / "data"
    whole_record, split_record = tmp_path / "whole", tmp_path / "split"
    whole_record.mkdir()
    split_record.mkdir()
    whole = _python(model, data, "train.py", "--batches", "8", "--record", str(whole_record))
    checkpoints = sorted((data / "checkpoints").iterdir(), key=lambda p: json.loads(
        (p / "metadata.json").read_text())["steps_completed"])
    assert [json.loads((c / "metadata.json").read_text())["steps_completed"] for c in checkpoints] == [4, 8]
    last = checkpoints[-1]
    # The Trainer's checkpoint: DeepSpeed's own files, the loop state, trial_state.pkl and the code
    assert {"model0", "det_state_dict_rank0.pth", "trial_state.pkl", "load_data.json", "code"} <= {
        p.name for p in last.iterdir()}
    assert (last / "model0" / "mp_rank_00_model_states.pt").is_file() and (last / "code" / "train.py").is_file()
    load_data = json.loads((last / "load_data.json").read_text())
    assert load_data["trial_type"] == "DeepSpeedTrial" and load_data["is_trainer"] is True
    with open(last / "trial_state.pkl", "rb") as f:
        state = pickle.load(f)
    assert state["batches_trained"] == 8 and state["last_val"] == 8 and state["trial_id"] is None
    # 8 batches of 2 micro batches: the loss falls
    losses = [x["loss"] for x in _losses(whole_record)]
    assert len(losses) == 16 and sum(losses[-4:]) < 0.5 * sum(losses[:4]), losses
    assert "'accuracy': " in whole and "validation metrics after 8 batches" in whole

    # A second `python train.py` resumes from the checkpoint after 4 batches: it trains batches 5-8 on the same
    # micro batches to the same losses, and ends with the same weights.
    resumed = _python(model, data, "train.py", "--batches", "8", "--resume", checkpoints[0].name,
                      "--record", str(split_record))
    assert "training continues from batch 4" in resumed
    assert _losses(split_record) == _losses(whole_record)[8:]
    assert DIGEST.findall(resumed) == DIGEST.findall(whole) and len(DIGEST.findall(whole)) == 1


# -- on the platform ------------------------------------------------------------------------------------------


def _submit(session: Session, config: Dict[str, Any]) -> int:
    config = {"searcher": {"name": "single", "metric": "val_loss"}, "max_restarts": 0,
              "reproducibility": {"experiment_seed": 7}, "entrypoint": "python3 train.py", **config}
    return int(session.post("/experiments", {"config": config, "model_definition": model_def(MODEL)})
               ["experiment"]["id"])


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Session, Dict[str, int]]]:
    if shutil.which("python3") is None:
        pytest.skip("needs python3")
    embedded = master.start(tmp_path_factory.mktemp("ds_trainer") / "data", slots=Slots(gpus=[], cpu_count=3),
                            preemption_timeout=30)
    session = embedded.session()
    experiments = {
        "paused": _submit(session, {"hyperparameters": {"wait_at": 6}}),
        "two_slots": _submit(session, {"entrypoint": "python3 -m determined.launch.deepspeed python3 train.py",
                                       "resources": {"slots_per_trial": 2}}),
    }
    try:
        yield session, experiments
    finally:
        embedded.stop(timeout=10)


@needs_deepspeed
def test_a_script_entrypoint_is_paused_and_resumes_exactly(platform: Tuple[Session, Dict[str, int]],
                                                          tmp_path: pathlib.Path) -> None:
    session, experiments = platform
    exp_id = experiments["paused"]
    trial_id = int(wait_for(lambda: (session.get(f"/experiments/{exp_id}")["trials"] or [None])[0], 60, 0.1,
                            what="a trial")["id"])
    wait_for(lambda: any("train: waiting to be paused at batch 6" in line for line in logs(session, trial_id)),
             240, 0.2, what="the script to wait for the pause")
    session.post(f"/experiments/{exp_id}/pause")
    wait_for(lambda: session.get(f"/experiments/{exp_id}")["trials"][0].get("status") == "PAUSED", 90, 0.2,
             what="the paused run to checkpoint and exit")
    session.post(f"/experiments/{exp_id}/activate")
    desc = ended(session, exp_id, 240)
    lines = logs(session, trial_id)
    assert desc["experiment"]["state"] == "COMPLETED", "\n".join(lines[-40:])
    assert any("training continues from batch 7" in line for line in lines), "\n".join(lines[-60:])
    detail = session.get(f"/trials/{trial_id}")
    training = detail["training_metrics"]
    assert [m["steps_completed"] for m in training] == [2, 4, 6, 7, 8]
    assert training[-1]["metrics"]["loss"] < 0.5 * training[0]["metrics"]["loss"]
    assert [m["steps_completed"] for m in detail["validation_metrics"]] == [4, 8]
    # the weights of a run that was not paused (the script's train(), with the trial's seed)
    seed = int(desc["trials"][0]["seed"])
    reference = _python(_model_dir(tmp_path), tmp_path / "data", str(HERE / "_ds_trainer_reference.py"), ".",
                        str(seed), "8", str(tmp_path / "checkpoints"))
    # (fit() returned at the pause too, and the script printed the weights it had then)
    digests = [m.group(1) for line in lines for m in [DIGEST.search(line)] if m]
    assert len(digests) == 2 and digests[-1:] == DIGEST.findall(reference), "\n".join(lines[-40:])


@needs_deepspeed
def test_a_script_entrypoint_trains_on_two_slots_through_the_deepspeed_launcher(
        platform: Tuple[Session, Dict[str, int]]) -> None:
    session, experiments = platform
    desc = ended(session, experiments["two_slots"], 300)
    [trial] = desc["trials"]
    lines = logs(session, trial["id"])
    assert desc["experiment"]["state"] == "COMPLETED", "\n".join(lines[-40:])
    detail = session.get(f"/trials/{trial['id']}")
    training = detail["training_metrics"]
    assert [m["steps_completed"] for m in training] == [2, 4, 6, 8]
    assert training[-1]["metrics"]["loss"] < 0.5 * training[0]["metrics"]["loss"]
    assert detail["validation_metrics"][-1]["metrics"]["accuracy"] >= 0.9
    checkpoint = detail["checkpoints"][-1]
    assert checkpoint["steps_completed"] == 8
    # Both ranks' loop states and ZeRO-1 optimizer shards, and the Trainer's files, make one checkpoint.
    assert {"det_state_dict_rank0.pth", "det_state_dict_rank1.pth", "trial_state.pkl", "code/train.py",
            "model0/zero_pp_rank_0_mp_rank_00_optim_states.pt",
            "model0/zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= set(checkpoint["resources"])
    assert any("[rank=1]" in line for line in lines) and any("[rank=0] train: final weights" in line for line in lines)
