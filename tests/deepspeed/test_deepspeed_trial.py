"""DeepSpeedTrial on CPU slots: a tiny MLP trains (loss falls), checkpoints through DeepSpeed's engine, and resumes
exactly (weights, optimizer, LR scheduler, RNG and counters as in an uninterrupted run) on 1 slot; on 2 slots through
`python3 -m determined.launch.deepspeed --trial` and the embedded master, with a restart from its checkpoint that
retrains the same batches to the same losses. DeepSpeed runs in processes of its own (its process group must not
outlive a run in the test process)."""
import importlib
import importlib.util
import json
import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import torch

from determined import master
from determined.config.entrypoint import launched_trial_class
from determined.master.rm import Slots
from tests.e2e._helpers import wait_for
from tests.master._helpers import model_def

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "pytorch"))

from test_resume import _assert_identical  # noqa: E402  (the PyTorchTrial resume test's comparison)

# DeepSpeed is in the dev extra; without it these tests cannot run (importing it here would only cost time).
needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed")


def _child(*runs: str) -> List[Dict[str, Any]]:
    out = subprocess.run([sys.executable, str(HERE / "_ds_child.py"), *runs],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return [json.loads(line[len("RESULT "):]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]


def _load(path: pathlib.Path) -> Any:
    return torch.load(str(path), map_location="cpu", weights_only=False)


@needs_deepspeed
def test_trains_checkpoints_and_resumes_exactly_on_one_slot(tmp_path: pathlib.Path) -> None:
    # 8 batches of 2 micro batches of 4 records, checkpointed after 4 and 8; then, in a new process, from the
    # checkpoint after 4 batches to 8 again.
    [whole] = _child(f"{tmp_path}:8")
    assert len(whole["checkpoints"]) == 2
    [resumed] = _child(f"{tmp_path}:8@{whole['checkpoints'][0]}@4")

    losses = [b["loss"] for r in whole["training"] for b in r["batch_metrics"]]
    assert len(losses) == 8 and sum(losses[-2:]) < 0.5 * sum(losses[:2]), losses
    assert [v["steps_completed"] for v in whole["validation"]] == [4, 8]
    assert whole["validation"][-1]["metrics"]["accuracy"] >= 0.9

    a, b = tmp_path / whole["checkpoints"][-1], tmp_path / resumed["checkpoints"][-1]
    assert json.loads((a / "metadata.json").read_text())["steps_completed"] == 8
    assert json.loads((a / "load_data.json").read_text())["trial_type"] == "DeepSpeedTrial"
    for name in ("model0/mp_rank_00_model_states.pt", "model0/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                 "det_state_dict_rank0.pth"):
        assert (b / name).is_file(), name
    whole_model, split_model = (_load(c / "model0/mp_rank_00_model_states.pt") for c in (a, b))
    for key in ("module", "lr_scheduler", "global_steps", "global_samples"):
        _assert_identical(whole_model[key], split_model[key], key)
    whole_opt, split_opt = (_load(c / "model0/zero_pp_rank_0_mp_rank_00_optim_states.pt")["optimizer_state_dict"]
                            for c in (a, b))
    assert vars(whole_opt.pop("loss_scaler")) == vars(split_opt.pop("loss_scaler"))
    _assert_identical(whole_opt, split_opt, "optimizer")
    whole_state, split_state = _load(a / "det_state_dict_rank0.pth"), _load(b / "det_state_dict_rank0.pth")
    assert whole_state["steps_completed"] == split_state["steps_completed"] == 8
    assert whole_state["callbacks"] == split_state["callbacks"] == {"counter": {"validations": 2}}
    _assert_identical(whole_state["rng_state"], split_state["rng_state"], "rng_state")
    # The resumed process trains the batches 5-8 of the uninterrupted run, to the same losses.
    assert [b for r in resumed["training"] for b in r["batch_metrics"]] == \
        [b for r in whole["training"] for b in r["batch_metrics"]][4:]


MODEL_DEF = (HERE / "_ds_trials.py").read_text()


@needs_deepspeed
def test_two_slots_through_the_launcher_restart_from_the_checkpoint(tmp_path: pathlib.Path) -> None:
    record = tmp_path / "record"
    record.mkdir()
    config = {
        "entrypoint": ["python3", "-m", "determined.launch.deepspeed", "--trial", "model_def:MLPTrial"],
        "hyperparameters": {"record_dir": str(record), "crash_at": 5},
        "resources": {"slots_per_trial": 2},
        "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 8}},
        "min_checkpoint_period": {"batches": 4},
        "scheduling_unit": 2,
        "max_restarts": 1,
    }
    with master.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=2)) as em:
        s = em.session()
        exp_id = s.post("/experiments", {"config": config, "model_definition": model_def({"model_def.py": MODEL_DEF})})[
            "experiment"]["id"]
        wait_for(lambda: s.get(f"/experiments/{exp_id}")["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED"),
                 timeout=280, what="the experiment to end")
        described = s.get(f"/experiments/{exp_id}")
        [trial] = described["trials"]
        logs = "\n".join(line["message"] for line in s.get(f"/trials/{trial['id']}/logs")["logs"])
        assert described["experiment"]["state"] == "COMPLETED", logs[-6000:]
        assert trial["restarts"] == 1 and trial["total_batches"] == 8, logs[-6000:]
        detail = s.get(f"/trials/{trial['id']}")
        checkpoint = detail["checkpoints"][-1]
        assert checkpoint["steps_completed"] == 8
        # Both ranks' loop states and ZeRO-1 optimizer shards make one checkpoint.
        assert {"det_state_dict_rank0.pth", "det_state_dict_rank1.pth", "model0/mp_rank_00_model_states.pt",
                "model0/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                "model0/zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= set(checkpoint["resources"])
        assert detail["validation_metrics"][-1]["metrics"]["accuracy"] >= 0.9
    for rank in (0, 1):
        lines = [json.loads(line) for line in (record / f"losses-rank{rank}.jsonl").read_text().splitlines()]
        # The chief failed in batch 5; the restart resumed at the checkpoint after batch 4 and trained it again.
        restart = next(i for i in range(1, len(lines)) if lines[i]["batch"] < lines[i - 1]["batch"])
        first_try = [x for x in lines[:restart] if x["batch"] == 4]
        second_try = [x for x in lines[restart:] if x["batch"] == 4]
        assert lines[restart]["batch"] == 4 and len(first_try) == 2 and first_try == second_try, lines
        losses = [x["loss"] for x in lines]
        assert sum(losses[-4:]) < 0.5 * sum(losses[:4]), losses


def test_local_test_finds_the_trial_class_of_a_launcher_entrypoint() -> None:
    launcher = ["python3", "-m", "determined.launch.deepspeed"]
    assert launched_trial_class([*launcher, "--trial", "model_def:T"]) == "model_def:T"
    assert launched_trial_class("python3 -m determined.launch.torch_distributed --trial=a.b:C") == "a.b:C"
    assert launched_trial_class([*launcher, "python3", "train.py"]) is None
    assert launched_trial_class("model_def:T") is None and launched_trial_class("python3 train.py --trial x:Y") is None


def test_without_deepspeed_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    for name in [n for n in sys.modules if n.startswith("determined.pytorch.deepspeed")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r"pip install 'determined-revived\[deepspeed\]'"):
        importlib.import_module("determined.pytorch.deepspeed")
