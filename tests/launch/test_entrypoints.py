"""Which entrypoints are Trial classes and which are commands, checked where an experiment is submitted."""
import argparse
import pathlib
import sys

import pytest

from determined import errors
from determined.common import context as det_context
from determined.config import InvalidExperimentConfig, load_experiment_config
from determined.config.entrypoint import command_of, is_trial_class, runs_a_script
from determined.exec import _script
from determined.master.lifecycle.model_def import decode_model_def
from determined.master.problems import RequestProblem
from tests.master._helpers import model_def

SEARCHER = {"name": "single", "metric": "loss", "max_length": 1}


def test_determineds_rule_decides_what_runs() -> None:
    assert is_trial_class("model_def:MNistTrial") and is_trial_class("pkg.sub:T2")
    assert not is_trial_class("python3 train.py") and not is_trial_class(["model_def:T"])
    assert command_of("python3 train.py --lr 0.1") == ["sh", "-c", "python3 train.py --lr 0.1"]
    assert command_of(["python3", "train.py"]) == ["python3", "train.py"]
    with pytest.raises(ValueError):
        command_of("model_def:T")
    assert runs_a_script(load_experiment_config({"entrypoint": ["python3", "train.py"], "searcher": SEARCHER}))
    assert _script.command_argv(["python3", "-m", "x"]) == [sys.executable, "-m", "x"]
    assert _script.command_argv(["bash", "run.sh"]) == ["bash", "run.sh"]


def test_horovod_is_refused_at_submission_with_what_to_use_instead() -> None:
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config({"entrypoint": ["python3", "-m", "determined.launch.horovod", "python3", "train.py"],
                                "searcher": SEARCHER})
    [problem] = info.value.problems
    assert problem.startswith("entrypoint: runs determined.launch.horovod; Horovod is not available here")
    assert "determined.launch.torch_distributed" in problem


def test_a_commands_files_are_not_checked_like_a_trial_class(tmp_path: pathlib.Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    det_context.check_entrypoint(str(tmp_path), "python3 train.py")  # no module:Class to look for
    with pytest.raises(errors.DeterminedError, match="no module 'model_def'"):
        det_context.check_entrypoint(str(tmp_path), "model_def:T")
    archive = model_def({"train.py": "print('hi')\n"})
    assert decode_model_def(archive, "python3 train.py") and decode_model_def(archive, ["python3", "train.py"])
    with pytest.raises(RequestProblem, match="the entrypoint module 'model' is not in the model directory"):
        decode_model_def(archive, "model:T")


def test_local_test_mode_names_what_to_do_for_a_script(tmp_path: pathlib.Path) -> None:
    from determined.cli import experiment

    config = tmp_path / "const.yaml"
    config.write_text("entrypoint: python3 train.py\nsearcher: {name: single, metric: loss, max_length: 1}\n")
    args = argparse.Namespace(config_file=str(config), model_def=str(tmp_path), local=True, test_mode=True,
                              cpu_slots=None, master=None, paused=False, detach=False)
    with pytest.raises(errors.DeterminedError, match="--local --test runs one batch of a Trial class"):
        experiment.create(args)


def test_local_test_mode_names_the_search_runner_for_a_custom_searcher_without_hparams(tmp_path: pathlib.Path) -> None:
    """0.19-0.37's custom-search examples give the trial its hyperparameters from the search method, not the config."""
    from determined.cli import experiment

    (tmp_path / "model_def.py").write_text("import determined as det\nclass T(det.Trial):\n    pass\n")
    config = tmp_path / "config.yaml"
    config.write_text("entrypoint: model_def:T\nsearcher: {name: custom, metric: loss, unit: batches}\n")
    args = argparse.Namespace(config_file=str(config), model_def=str(tmp_path), local=True, test_mode=True,
                              cpu_slots=None, master=None, paused=False, detach=False)
    with pytest.raises(errors.DeterminedError, match="LocalSearchRunner"):
        experiment.create(args)
