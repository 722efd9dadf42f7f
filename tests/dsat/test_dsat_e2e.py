"""`python3 -m determined.pytorch.dsat binary` end to end on the embedded master: a tiny DeepSpeedTrial (written
as Determined's example is) is profiled, then trials over ZeRO stages 1 and 2 measure their speed with DeepSpeed's
engine on CPU slots; the stage-2 trials fail as out of memory and their binary search goes on with a smaller micro
batch; the best config is printed and written, and the experiment completes. The same for a Core API script whose
engine calls run in `dsat_reporting_context`."""
import json
import os
import pathlib
import pickle
import re
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("deepspeed")

MODEL = pathlib.Path(__file__).resolve().parent / "_dsat_model"


@pytest.mark.slow
def test_binary_autotune_of_a_deepspeed_trial_completes(tmp_path: pathlib.Path) -> None:
    config = yaml.safe_load((MODEL / "dsat.yaml").read_text())
    config["hyperparameters"] = {"deepspeed_config": "ds_config.json", "oom_stage": 2}
    (tmp_path / "dsat.yaml").write_text(yaml.safe_dump(config))
    searcher_dir = tmp_path / "searcher"
    env = dict(os.environ, DET_CPU_SLOTS="2")
    out = subprocess.run(
        [sys.executable, "-m", "determined.pytorch.dsat", "binary", str(tmp_path / "dsat.yaml"), str(MODEL),
         "--max-trials", "4", "--max-concurrent-trials", "2", "--zero-stages", "1", "2",
         "--start-profile-step", "1", "--end-profile-step", "2", "--random-seed", "3",
         "--searcher-dir", str(searcher_dir)],  # seed 3: the first two configs are at stages 1 and 2
        capture_output=True, text=True, timeout=500, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    assert "experiment 1 ended: COMPLETED" in out.stderr, out.stderr[-3000:]
    assert "Best DeepSpeed config (FLOPS_per_gpu = " in out.stdout

    root = searcher_dir / "exp_1"
    with open(root / f"event_{(root / 'event_id').read_text()}" / "trial_tracker.pkl", "rb") as f:
        tracker = pickle.load(f)
    trials = [t for _, t in tracker if t.completed]  # (the tracker also holds the queued trials never run)
    assert len(trials) == 4 and not tracker.running_trials
    profile = tracker.model_profile_info_trial
    # DeepSpeed counted the MLP's 8*16+16 + 16*2+2 parameters; the platform added the memory of a CPU slot.
    assert profile.metric["num_params"] == profile.metric["trainable_num_params"] == 178
    assert profile.metric["memory_kind"] == "cpu" and profile.metric["gpu_mem"] > 2**30
    assert profile.metric["activation_mem_per_gpu"] >= 0
    others = [t for t in trials if t is not profile]
    assert {t.stage for t in others} == {1, 2}
    # The two configs run side by side: when the stage-1 config and its child both ended before the stage-2 config
    # failed, the search had its 4 trials and stopped there (as Determined's DSAT does); else the binary search goes
    # on below the failed micro batch.
    exit_codes = [int(code) for code in re.findall(r"trial \d+: run \w+ exited with code (-?\d+)", out.stderr)]
    assert len(exit_codes) == 4, out.stderr[-3000:]
    failure_came_last = exit_codes[-1] != 0
    for t in others:
        assert t.error == (t.stage == 2), t
        if t.error and not failure_came_last:
            assert t.children and all(c.mbs < t.mbs for c in t.children)
        elif not t.error:  # DeepSpeed's measurements of the profiled steps
            assert t.metric["FLOPS_per_gpu"] > 0 and t.metric["throughput"] > 0 and t.metric["latency"] > 0
    best = tracker.best_trial
    assert best.stage == 1 and best.metric["FLOPS_per_gpu"] == max(t.metric["FLOPS_per_gpu"] for t in others
                                                                    if not t.error)
    written = json.loads((searcher_dir / "best_ds_config.json").read_text())
    assert written["train_micro_batch_size_per_gpu"] == best.mbs and written["zero_optimization"]["stage"] == 1
    assert "autotuning" not in written and written["optimizer"]["params"]["torch_adam"] is True


@pytest.mark.slow
def test_binary_autotune_of_a_core_api_script_completes(tmp_path: pathlib.Path) -> None:
    config = yaml.safe_load((MODEL / "dsat.yaml").read_text())
    config["entrypoint"] = "python3 -m determined.launch.deepspeed python3 script.py"
    config["hyperparameters"] = {"deepspeed_config": "ds_config.json"}
    (tmp_path / "core.yaml").write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [sys.executable, "-m", "determined.pytorch.dsat", "binary", str(tmp_path / "core.yaml"), str(MODEL),
         "--max-trials", "2", "--zero-stages", "2", "--start-profile-step", "1", "--end-profile-step", "2",
         "--search-range-factor", "0.01", "--searcher-dir", str(tmp_path / "searcher")],
        capture_output=True, text=True, timeout=500, env=dict(os.environ, DET_CPU_SLOTS="1"), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    assert "experiment 1 ended: COMPLETED" in out.stderr, out.stderr[-3000:]
    written = json.loads((tmp_path / "searcher" / "best_ds_config.json").read_text())
    metrics = json.loads((tmp_path / "searcher" / "best_ds_metrics.json").read_text())
    assert written["zero_optimization"]["stage"] == 2 and written["train_micro_batch_size_per_gpu"] >= 1
    assert metrics["FLOPS_per_gpu"] > 0 and metrics["throughput"] > 0
