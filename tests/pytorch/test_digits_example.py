"""The digits example: real training on scikit-learn's digits with both API generations."""
import pathlib
import sys
from typing import Any, Dict

import pytest
import torch
import yaml

from _pytorch_runs import REPO, run_trial
from determined import _execution
from determined import config as det_config
import determined.pytorch as det_torch

EXAMPLE = REPO / "examples" / "digits_pytorch"


EXAMPLE_MODULES = ("model_def", "model_def_old_api", "data")


def _forget_example_modules() -> None:
    for name in EXAMPLE_MODULES:
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def example_modules() -> Any:
    _forget_example_modules()  # other tests may have imported a different model_def
    sys.path.insert(0, str(EXAMPLE))
    try:
        import model_def
        import model_def_old_api

        yield model_def, model_def_old_api
    finally:
        sys.path.remove(str(EXAMPLE))
        _forget_example_modules()


def _const_config(**overrides: Any) -> Dict[str, Any]:
    raw = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    raw.update(overrides)
    return det_config.load_experiment_config(raw)


def test_loss_drops_and_accuracy_is_high_new_and_old_api_agree(example_modules: Any, tmp_path: pathlib.Path) -> None:
    new_api, old_api = example_modules
    config = _const_config(searcher={"name": "single", "metric": "validation_accuracy",
                                     "smaller_is_better": False, "max_length": {"batches": 300}})
    results = []
    for module in (new_api, old_api):
        context = run_trial(module.DigitsTrial, tmp_path / module.__name__, [300], config)
        training = context.train.training_history
        validation = context.train.validation_history
        assert [r["steps_completed"] for r in training] == [50, 100, 150, 200, 250, 300]
        assert all(len(r["batch_metrics"]) == 50 for r in training)
        first_loss, last_loss = training[0]["metrics"]["loss"], training[-1]["metrics"]["loss"]
        assert last_loss < first_loss / 3
        assert [v["steps_completed"] for v in validation] == [100, 200, 300]
        assert validation[-1]["metrics"]["validation_accuracy"] > 0.93
        assert validation[-1]["metrics"]["validation_loss"] < 0.3
        assert context.searcher.completed_operations == [
            {"length": 300, "metric": validation[-1]["metrics"]["validation_accuracy"]}
        ]
        results.append((training, validation))
    # Same seed, same model, same data order: the 0.12 API trains exactly as the 0.13 API does.
    assert results[0] == results[1]


@pytest.mark.parametrize("module_index", [0, 1])
def test_one_batch_on_the_example(example_modules: Any, module_index: int) -> None:
    summary = _execution.test_one_batch(example_modules[module_index].DigitsTrial, _const_config())
    assert len(summary["batch_metrics"]) == 1
    assert set(summary["validation_metrics"]) == {"validation_loss", "validation_accuracy"}
    assert {"state_dict.pth", "load_data.json"} <= set(summary["checkpoint_resources"])


def test_load_trial_from_checkpoint_path(example_modules: Any, tmp_path: pathlib.Path) -> None:
    new_api, old_api = example_modules
    config = _const_config()
    for module in (new_api, old_api):
        ckpt_dir = tmp_path / module.__name__
        context = run_trial(module.DigitsTrial, ckpt_dir, [20], config)
        uuid = context.checkpoint.reported[-1]["uuid"]
        saved = torch.load(ckpt_dir / uuid / "state_dict.pth", weights_only=False)["models_state_dict"][0]
        loaded = det_torch.load_trial_from_checkpoint_path(str(ckpt_dir / uuid))
        if module is new_api:
            assert isinstance(loaded, new_api.DigitsTrial)
            model = loaded.model
        else:
            assert isinstance(loaded, torch.nn.Module)
            model = loaded
        for name, tensor in model.state_dict().items():
            assert torch.equal(tensor, saved[name]), name


def test_a_pbt_clone_trains_with_its_own_learning_rate(example_modules: Any, tmp_path: pathlib.Path) -> None:
    new_api, _ = example_modules
    config = _const_config()
    hparams = {k: v["val"] for k, v in config["hyperparameters"].items()}
    parent = run_trial(new_api.DigitsTrial, tmp_path, [20], config, hparams=hparams)
    parent_uuid = parent.checkpoint.reported[-1]["uuid"]
    explored = {**hparams, "learning_rate": hparams["learning_rate"] * 5}
    clone = run_trial(new_api.DigitsTrial, tmp_path, [30], config, hparams=explored,
                      latest_checkpoint=parent_uuid, steps_completed=20)
    clone_uuid = clone.checkpoint.reported[-1]["uuid"]

    def saved_lr(uuid: str) -> float:
        state = torch.load(tmp_path / uuid / "state_dict.pth", weights_only=False)
        return state["optimizers_state_dict"][0]["param_groups"][0]["lr"]

    assert saved_lr(parent_uuid) == hparams["learning_rate"]
    assert saved_lr(clone_uuid) == explored["learning_rate"], "the checkpoint's learning rate must not win"
