"""When the controller checkpoints and reports: checkpoint_policy, min_*_period, scheduling_unit, contents."""
import json
import pathlib
from typing import Any, Dict, List

import pytest
import torch

from _pytorch_runs import make_config, run_trial
import _trials
import determined.pytorch as det_torch

# Validation losses in order: the best so far are the 1st, 2nd, 4th and 6th.
LOSSES = [5.0, 3.0, 4.0, 2.0, 6.0, 1.0]


class ScriptedLossTrial(_trials.DropoutTrial):
    calls: List[int] = []

    def evaluate_batch(self, batch: Any) -> Dict[str, Any]:
        return {"val_loss": LOSSES[len(self.calls) % len(LOSSES)]}

    def evaluation_reducer(self) -> det_torch.Reducer:
        return det_torch.Reducer.MAX

    def build_callbacks(self) -> Dict[str, det_torch.PyTorchCallback]:
        return {"count": _CountValidations()}


class _CountValidations(det_torch.PyTorchCallback):
    def on_validation_end(self, metrics: Dict[str, Any]) -> None:
        ScriptedLossTrial.calls.append(1)


def _run(tmp_path: pathlib.Path, policy: str, **config: Any) -> Any:
    ScriptedLossTrial.calls = []
    cfg = make_config(checkpoint_policy=policy, min_validation_period={"batches": 5}, **config)
    return run_trial(ScriptedLossTrial, tmp_path, [30], cfg)


@pytest.mark.parametrize(
    "policy, expected",
    [("all", [5, 10, 15, 20, 25, 30]), ("best", [5, 10, 20, 30]), ("none", [30])],
)
def test_checkpoint_policy(tmp_path: pathlib.Path, policy: str, expected: List[int]) -> None:
    context = _run(tmp_path, policy)
    assert [v["steps_completed"] for v in context.train.validation_history] == [5, 10, 15, 20, 25, 30]
    assert [c["steps_completed"] for c in context.checkpoint.reported] == expected
    assert context.searcher.completed_operations == [{"length": 30, "metric": 1.0}]


def test_min_checkpoint_period_and_scheduling_unit(tmp_path: pathlib.Path) -> None:
    config = make_config(checkpoint_policy="none", min_checkpoint_period={"batches": 4}, scheduling_unit=3)
    context = run_trial(_trials.DropoutTrial, tmp_path, [10], config)
    assert [c["steps_completed"] for c in context.checkpoint.reported] == [4, 8, 10]
    # Reports every 3 batches, and wherever a checkpoint or the end of the operation cuts a step short.
    assert [r["steps_completed"] for r in context.train.training_history] == [3, 4, 7, 8, 10]
    assert [len(r["batch_metrics"]) for r in context.train.training_history] == [3, 1, 3, 1, 2]
    assert [v["steps_completed"] for v in context.train.validation_history] == [10]


def test_periods_in_records_and_epochs(tmp_path: pathlib.Path) -> None:
    # global_batch_size 4: 8 records = 2 batches; 1 epoch of 20 records = 5 batches.
    config = make_config(checkpoint_policy="none", records_per_epoch=20,
                         min_validation_period={"records": 8}, min_checkpoint_period={"epochs": 1})
    context = run_trial(_trials.DropoutTrial, tmp_path, [6], config)
    assert [v["steps_completed"] for v in context.train.validation_history] == [2, 4, 6]
    assert [c["steps_completed"] for c in context.checkpoint.reported] == [5, 6]


def test_several_operations_checkpoint_before_reporting(tmp_path: pathlib.Path) -> None:
    context = run_trial(_trials.DropoutTrial, tmp_path, [3, 3, 7], make_config(checkpoint_policy="none"))
    assert [c["steps_completed"] for c in context.checkpoint.reported] == [3, 7]
    assert [v["steps_completed"] for v in context.train.validation_history] == [3, 7]
    assert [o["length"] for o in context.searcher.completed_operations] == [3, 3, 7]


def test_checkpoint_contents(tmp_path: pathlib.Path) -> None:
    context = run_trial(_trials.DropoutTrial, tmp_path, [4])
    reported = context.checkpoint.reported[-1]
    assert reported["framework"] == f"torch-{torch.__version__}" and reported["format"] == "cloudpickle"
    path = tmp_path / reported["uuid"]
    assert sorted(p.name for p in path.iterdir()) == ["load_data.json", "metadata.json", "state_dict.pth"]
    assert json.loads((path / "metadata.json").read_text())["steps_completed"] == 4  # 0.38's layout
    state = torch.load(path / "state_dict.pth", weights_only=False)
    assert {"models_state_dict", "optimizers_state_dict", "lr_schedulers_state_dict", "callbacks",
            "rng_state", "steps_completed"} <= set(state)
    assert set(state["rng_state"]) >= {"cpu_rng_state", "np_rng_state", "random_rng_state"}
    load_data = json.loads((path / "load_data.json").read_text())
    assert load_data["trial_cls_spec"] == "_trials:DropoutTrial"
    assert load_data["hparams"] == {"global_batch_size": 4}


def test_restores_checkpoints_with_0_12_10_key_names(tmp_path: pathlib.Path) -> None:
    first = run_trial(_trials.OldApiTrial, tmp_path, [4])
    path = tmp_path / first.checkpoint.reported[-1]["uuid"]
    state = torch.load(path / "state_dict.pth", weights_only=False)
    legacy = {
        "model_state_dict": state["models_state_dict"][0],
        "optimizer_state_dict": state["optimizers_state_dict"][0],
        "lr_scheduler": state["lr_schedulers_state_dict"][0],
        "callbacks": state["callbacks"],
    }
    torch.save(legacy, path / "state_dict.pth")
    second = run_trial(_trials.OldApiTrial, tmp_path, [4], latest_checkpoint=path.name, steps_completed=4)
    # Nothing left to train: the operation is validated and reported without another checkpoint.
    assert second.checkpoint.reported == []
    assert second.searcher.completed_operations[0]["length"] == 4
    restored = det_torch.load_trial_from_checkpoint_path(str(path))
    for name, tensor in restored.state_dict().items():
        assert torch.equal(tensor, legacy["model_state_dict"][name])
