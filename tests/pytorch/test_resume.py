"""Exact resume: N batches, checkpoint, a new process restores and trains N more == 2N batches in one go."""
import json
import pathlib
import subprocess
import sys
from typing import Any, Dict

import numpy as np
import torch

from _pytorch_runs import HERE, run_trial
import _trials


def _state(ckpt_dir: pathlib.Path, uuid: str) -> Dict[str, Any]:
    return torch.load(ckpt_dir / uuid / "state_dict.pth", weights_only=False)


def _assert_identical(a: Any, b: Any, where: str = "state") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), f"{where} differs"
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and np.array_equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {a.keys()} != {b.keys()}"
        for key in a:
            _assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _resume_in_new_process(trial: str, ckpt_dir: pathlib.Path, length: int, uuid: str, steps: int) -> Dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(HERE / "_resume_child.py"), trial, str(ckpt_dir), str(length), uuid, str(steps)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _check_resume(trial_name: str, tmp_path: pathlib.Path, n: int) -> None:
    trial = getattr(_trials, trial_name)
    # 20 records in batches of 4: epochs of 5 batches, so N=7 resumes in the middle of a shuffled epoch.
    whole_dir = tmp_path / "whole"
    whole = run_trial(trial, whole_dir, [2 * n])
    whole_state = _state(whole_dir, whole.checkpoint.reported[-1]["uuid"])

    split_dir = tmp_path / "split"
    first = run_trial(trial, split_dir, [n])
    uuid = first.checkpoint.reported[-1]["uuid"]
    assert first.checkpoint.reported[-1]["steps_completed"] == n
    result = _resume_in_new_process(trial_name, split_dir, 2 * n, uuid, n)
    split_state = _state(split_dir, result["checkpoints"][-1])

    assert whole_state["steps_completed"] == split_state["steps_completed"] == 2 * n
    for key in ("models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict", "rng_state"):
        _assert_identical(whole_state[key], split_state[key], key)
    # Training metrics of the resumed batches are those of the same batches in the uninterrupted run.
    whole_batches = [b for r in whole.train.training_history for b in r["batch_metrics"]]
    resumed_batches = [b for r in result["training"] for b in r["batch_metrics"]]
    assert resumed_batches == whole_batches[n:]


def test_exact_resume_in_a_new_process_new_api(tmp_path: pathlib.Path) -> None:
    _check_resume("DropoutTrial", tmp_path, 7)


def test_exact_resume_in_a_new_process_old_api(tmp_path: pathlib.Path) -> None:
    _check_resume("OldApiTrial", tmp_path, 6)


def test_callback_state_is_checkpointed(tmp_path: pathlib.Path) -> None:
    first = run_trial(_trials.DropoutTrial, tmp_path, [5])
    uuid = first.checkpoint.reported[-1]["uuid"]
    assert _state(tmp_path, uuid)["callbacks"] == {"counter": {"validations": 1}}
    second = run_trial(_trials.DropoutTrial, tmp_path, [10], latest_checkpoint=uuid, steps_completed=5)
    assert _state(tmp_path, second.checkpoint.reported[-1]["uuid"])["callbacks"] == {"counter": {"validations": 2}}


def test_preemption_checkpoints_and_resumes_exactly(tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    whole = run_trial(_trials.DropoutTrial, tmp_path / "whole", [9])
    whole_state = _state(tmp_path / "whole", whole.checkpoint.reported[-1]["uuid"])

    calls = {"n": 0}

    def preempt_after_four(self: Any) -> bool:
        calls["n"] += 1
        return calls["n"] >= 4

    from determined import _trial_loop
    from determined.core import PreemptContext

    monkeypatch.setattr(_trial_loop, "QUIET_LOOK_S", 0.0)  # look for a preemption after every batch
    monkeypatch.setattr(PreemptContext, "should_preempt", preempt_after_four)
    monkeypatch.setattr(PreemptContext, "_chief_should_preempt", lambda self: False)
    preempted = run_trial(_trials.DropoutTrial, tmp_path / "split", [9])
    monkeypatch.undo()
    assert [c["steps_completed"] for c in preempted.checkpoint.reported] == [4]
    assert preempted.train.validation_history == []
    assert preempted.searcher.completed_operations == []
    resumed = run_trial(
        _trials.DropoutTrial, tmp_path / "split", [9],
        latest_checkpoint=preempted.checkpoint.reported[-1]["uuid"], steps_completed=4,
    )
    state = _state(tmp_path / "split", resumed.checkpoint.reported[-1]["uuid"])
    _assert_identical(whole_state["models_state_dict"], state["models_state_dict"], "models")
    _assert_identical(whole_state["optimizers_state_dict"], state["optimizers_state_dict"], "optimizers")
    assert resumed.searcher.completed_operations[0]["length"] == 9
