"""Configs as Determined read them, end to end: a real `det experiment create` of a YAML 1.2 config with nested
hyperparameters, on the embedded master, with real trial processes (a framework-free probe trial)."""
import json
import pathlib
import random

import pytest

from determined import _execution
from tests.core._probe_trial import MODEL_DEF
from tests.e2e._helpers import det, det_json, in_process

pytestmark = pytest.mark.slow

CONFIG = """
name: nested search
entrypoint: model_def:ProbeTrial
max_restarts: 0
hyperparameters:
  scale: 1e-4
  optim:
    lr: {type: log, minval: -3, maxval: -1}
    momentum: .9
    warmup: {type: int, minval: 1, maxval: 5}
searcher: {name: random, metric: loss, max_trials: 2, max_length: 1}
environment:
  image: determinedai/environments:cuda-11.3-pytorch-1.10-tf-2.8-gpu-0.19.4
  environment_variables: [MY_VAR=yes]
"""


def test_nested_search_end_to_end(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model_def.py").write_text(MODEL_DEF)
    path = tmp_path / "exp.yaml"
    path.write_text(CONFIG)
    proc = det("experiment", "create", str(path), str(model), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: environment.image: has no effect here" in proc.stderr
    assert "optim.lr" in proc.stdout  # the CLI table shows nested hyperparameters under dotted names

    desc = det_json("experiment", "describe", "1")
    assert desc["name"] == "nested search" and desc["state"] == "COMPLETED"
    assert [h["name"] for h in desc["searched_hparams"]] == ["optim.lr", "optim.warmup"]
    for trial in desc["trials"]:
        hparams = trial["hparams"]
        assert hparams["scale"] == 1e-4 and isinstance(hparams["scale"], float)
        assert set(hparams["optim"]) == {"lr", "momentum", "warmup"} and hparams["optim"]["momentum"] == 0.9
        assert 1e-3 <= hparams["optim"]["lr"] <= 1e-1 and 1 <= hparams["optim"]["warmup"] <= 5
        logs = in_process.det("trial", "logs", str(trial["id"]), check=True).stdout
        probe = json.loads(logs.split("PROBE ", 1)[1].splitlines()[0])
        assert probe["optim"] == hparams["optim"]  # delivered nested: context.get_hparam("optim")["lr"]
        assert probe["env"]["MY_VAR"] == "yes"  # a YAML 1.1 boolean word stays the string it is
        assert "config: environment.image: has no effect here" in logs


def test_a_0_12_config_runs_in_local_test_mode(tmp_path: pathlib.Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model_def.py").write_text(MODEL_DEF)
    path = tmp_path / "old.yaml"
    path.write_text(
        "description: a 0.12 config\nentrypoint: model_def:ProbeTrial\nbatches_per_step: 10\n"
        "hyperparameters: {global_batch_size: 16, optim: {lr: 1e-2}}\n"
        "searcher: {name: single, metric: loss, max_steps: 5}\nmin_validation_period: 2\n"
    )
    proc = in_process.det("experiment", "create", str(path), str(model), "--local", "--test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Local test mode passed" in proc.stdout
    # The Native API's local test mode takes the same 0.12 config as a dict.
    import sys

    sys.path.insert(0, str(model))
    try:
        import model_def  # type: ignore[import-not-found]

        raw = {"batches_per_step": 10, "hyperparameters": {"optim": {"lr": 0.5}},
               "searcher": {"name": "single", "metric": "loss", "max_steps": 5}, "min_validation_period": 2}
        summary = _execution.test_one_batch(model_def.ProbeTrial, raw, hparams={"optim": {"lr": random.random()}})
        assert summary["validation_metrics"]["loss"] == summary["hparams"]["optim"]["lr"]
    finally:
        sys.path.remove(str(model))
        sys.modules.pop("model_def", None)
