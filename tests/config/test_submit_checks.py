"""Config errors that can be known before training are found at submit (issue 34): each names the field and the fix.

Lengths that come to less than one batch, log hyperparameters beyond a float, and an entrypoint that does not
resolve to a file (or a Trial class) of the model directory; the last both as a pure function of the files and
through the master's POST /experiments.
"""
import pathlib
from typing import Any, Callable, Dict, List, Optional, Set

import pytest

from determined import errors
from determined.config import InvalidExperimentConfig, load_experiment_config
from determined.config.entrypoint_files import entrypoint_file_problems
from determined.master import in_process_session
from tests.master._helpers import config as master_config, model_def

Config = Callable[..., Dict[str, Any]]


def problems_of(raw: Dict[str, Any]) -> List[str]:
    with pytest.raises(InvalidExperimentConfig) as info:
        load_experiment_config(raw)
    return info.value.problems


@pytest.mark.parametrize("overrides, expected", [
    ({"searcher": {"name": "single", "metric": "m", "max_length": {"records": 10}}},
     "searcher.max_length: 10 records is less than one batch of global_batch_size 32: a trial would train 0 batches; "
     "give at least 32 records (or a length in batches, e.g. {batches: 100})"),
    ({"searcher": {"name": "single", "metric": "m", "max_length": {"epochs": 1}}, "records_per_epoch": 20},
     "searcher.max_length: 1 epoch(s) of records_per_epoch 20 = 20 records is less than one batch of "
     "global_batch_size 32: a trial would train 0 batches; give enough epochs for 32 records, or check "
     "records_per_epoch (or a length in batches, e.g. {batches: 100})"),
    ({"min_validation_period": {"records": 31}},
     "min_validation_period: 31 records is less than one batch of global_batch_size 32: a trial would never validate "
     "by period (0 batches is off); give at least 32 records (or a length in batches, e.g. {batches: 100})"),
    ({"min_checkpoint_period": {"epochs": 1}, "records_per_epoch": 8},
     "min_checkpoint_period: 1 epoch(s) of records_per_epoch 8 = 8 records is less than one batch of "
     "global_batch_size 32: a trial would never checkpoint by period (0 batches is off); give enough epochs for 32 "
     "records, or check records_per_epoch (or a length in batches, e.g. {batches: 100})"),
    # A searched batch size: the largest one decides.
    ({"searcher": {"name": "single", "metric": "m", "max_length": {"records": 64}},
      "hyperparameters": {"global_batch_size": {"type": "categorical", "vals": [16, 128]}}},
     "searcher.max_length: 64 records is less than one batch of global_batch_size 128"),
    ({"searcher": {"name": "adaptive", "metric": "m", "max_length": {"records": 64}, "budget": {"records": 640}},
      "hyperparameters": {"global_batch_size": {"type": "int", "minval": 8, "maxval": 100}}},
     "searcher.max_length: 64 records is less than one batch of global_batch_size 100"),
])
def test_a_length_under_one_batch_is_refused(minimal: Config, overrides: Dict[str, Any], expected: str) -> None:
    problems = problems_of(minimal(**overrides))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_lengths_of_a_batch_or_more_and_scripts_pass(minimal: Config) -> None:
    load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_length": {"records": 32}},
                                   min_validation_period={"records": 0}))
    load_experiment_config(minimal(searcher={"name": "single", "metric": "m", "max_length": {"epochs": 1}},
                                   records_per_epoch=32))
    # A script gets its lengths in their own unit (nothing is converted to batches), so nothing to refuse.
    load_experiment_config(minimal(entrypoint="python3 train.py",
                                   searcher={"name": "single", "metric": "m", "max_length": {"records": 10}}))


@pytest.mark.parametrize("spec, expected", [
    ({"type": "log", "base": 10, "minval": -5, "maxval": 400},
     "hyperparameters.lr.maxval: 10 ** 400 is beyond the largest float (about 1.8e308); minval and maxval are "
     "exponents of base: for 1e-5 to 1e-1 with base 10, give minval -5 and maxval -1"),
    ({"type": "log", "base": 10, "minval": -400, "maxval": -1},
     "hyperparameters.lr.minval: 10 ** -400 is 0 in floating point; minval and maxval are exponents of base"),
    ({"type": "log", "base": 0.5, "minval": -2000, "maxval": 1},
     "hyperparameters.lr.minval: 0.5 ** -2000 is beyond the largest float"),
])
def test_a_log_hyperparameter_beyond_a_float_is_refused(minimal: Config, spec: Dict[str, Any], expected: str) -> None:
    problems = problems_of(minimal(hyperparameters={"global_batch_size": 32, "lr": spec}))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_log_hyperparameter_inside_a_float_passes(minimal: Config) -> None:
    load_experiment_config(minimal(hyperparameters={"global_batch_size": 32,
                                                    "lr": {"type": "log", "base": 10, "minval": -300, "maxval": 300}}))


def _files(files: Dict[str, str]) -> Any:
    names: Set[str] = set(files)

    def read(name: str) -> Optional[bytes]:
        return files[name].encode()

    return names, read


TRIAL = "from determined.pytorch import PyTorchTrial\n\nclass MyTrial(PyTorchTrial):\n    pass\n"


@pytest.mark.parametrize("entrypoint, files", [
    ("model_def:MyTrial", {"model_def.py": TRIAL}),
    ("pkg.model:MyTrial", {"pkg/model.py": TRIAL}),
    ("pkg:MyTrial", {"pkg/__init__.py": "from .model import MyTrial\n", "pkg/model.py": TRIAL}),
    ("model_def:MyTrial", {"model_def.py": "try:\n    from fast import MyTrial\nexcept ImportError:\n"
                                          "    class MyTrial:\n        pass\n"}),
    ("model_def:Alias", {"model_def.py": TRIAL + "Alias = MyTrial\n"}),
    ("model_def:MyTrial", {"model_def.py": "from trials import *\n"}),  # cannot tell: accepted
    ("model_def:MyTrial", {"model_def.py": "def __getattr__(name):\n    return object\n"}),
    ("model_def:MyTrial", {"model_def.py": "globals()['MyTrial'] = type('MyTrial', (), {})\n"}),
    ("python3 train.py --epochs 3", {"train.py": ""}),
    (["python3", "-u", "./src/train.py"], {"src/train.py": ""}),
    ("python3 -m determined.launch.torch_distributed python3 train.py", {"train.py": ""}),
    ("python3 -m determined.launch.torch_distributed --trial model_def:MyTrial", {"model_def.py": TRIAL}),
    ("torchrun --nproc_per_node 2 train.py", {"train.py": ""}),
    ("cd src && python3 train.py", {"src/train.py": ""}),  # the shell decides: not checked
    ("python3 made_by_hook.py", {"startup-hook.sh": "echo > made_by_hook.py"}),
    ("python3 /opt/code/train.py", {}),  # outside the model directory: not checked
    ("python3 -m pkg.train", {}),  # a module may be installed: not checked
    ("sh run.sh", {}),
])
def test_an_entrypoint_that_resolves_passes(entrypoint: Any, files: Dict[str, str]) -> None:
    assert entrypoint_file_problems(entrypoint, *_files(files)) == []


@pytest.mark.parametrize("entrypoint, files, expected", [
    ("model_def:MyTrail", {"model_def.py": TRIAL},
     "entrypoint: model_def.py has no top-level 'MyTrail' (its top-level classes are MyTrial); name the Trial "
     "class as `model_def:ClassName`"),
    ("model_def:MyTrial", {"model_def.py": "def build():\n    class MyTrial:\n        pass\n"},
     "entrypoint: model_def.py has no top-level 'MyTrial' (it defines no top-level class)"),
    ("model_def:MyTrial", {"model_def.py": "class MyTrial(:\n    pass\n"},
     "entrypoint: model_def.py does not parse: "),
    ("python3 -m determined.launch.torch_distributed --trial model:MyTrial", {"model_def.py": TRIAL},
     "entrypoint: the module 'model' of 'model:MyTrial' is not in the model directory (expected model.py or "
     "model/__init__.py); give the module's path from the model directory's top, with dots for directories"),
    ("python3 trian.py --epochs 3", {"train.py": "", "data.py": ""},
     "entrypoint: runs 'trian.py', which is not in the model directory (it has data.py, train.py); give the path of "
     "the script relative to the model directory, or add the file"),
    (["python3", "-m", "determined.launch.torch_distributed", "python3", "src/train.py"], {"train.py": ""},
     "entrypoint: runs 'src/train.py', which is not in the model directory"),
    ("torchrun --nproc_per_node 2 main.py", {"train.py": ""}, "entrypoint: runs 'main.py'"),
])
def test_an_entrypoint_that_does_not_resolve_is_named(entrypoint: Any, files: Dict[str, str], expected: str) -> None:
    problems = entrypoint_file_problems(entrypoint, *_files(files))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_native_scripts_placeholder_entrypoint_is_not_resolved() -> None:
    """A Native API experiment runs internal.native.command; its entrypoint (Determined kept `module:unused` there)
    names nothing to resolve."""
    from determined.master.lifecycle.model_def import decode_model_def
    from determined.master.problems import RequestProblem

    archive = model_def({"core_trial.py": "import determined\n"})
    assert decode_model_def(archive, "core_trial:unused", resolve_entrypoint=False)
    with pytest.raises(RequestProblem):
        decode_model_def(archive, "core_trial:unused")


def test_the_master_refuses_an_entrypoint_that_does_not_resolve_at_submit(tmp_path: pathlib.Path) -> None:
    session = in_process_session(tmp_path / "data")
    try:
        for entrypoint, files, expected in (
                ("model:Trial", {"model.py": "class T:\n    pass\n"},
                 "entrypoint: model.py has no top-level 'Trial' (its top-level classes are T)"),
                ("python3 train.py", {"model.py": ""}, "entrypoint: runs 'train.py', which is not in the model")):
            with pytest.raises(errors.APIError) as info:
                session.post("/experiments", {"config": master_config(entrypoint=entrypoint),
                                              "model_definition": model_def(files)})
            assert info.value.status_code == 400 and expected in str(info.value), info.value
        assert session.get("/experiments")["experiments"] == [], "nothing was stored"
        created = session.post("/experiments", {"config": master_config(), "model_definition": model_def()})
        assert created["experiment"]["id"] >= 1
    finally:
        session.close()
