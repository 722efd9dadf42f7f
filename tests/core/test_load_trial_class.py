import pathlib
import textwrap

import pytest

import determined as det
from determined import _execution, errors

GOOD = '''
import determined as det

class Helper:
    pass

class MyTrial(det.Trial):
    pass

class OtherTrial(det.Trial):
    pass
'''


def _model_dir(tmp_path: pathlib.Path, name: str, source: str, module: str = "model_def") -> pathlib.Path:
    root = tmp_path / name
    root.mkdir()
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


def test_loads_the_class(tmp_path: pathlib.Path) -> None:
    root = _model_dir(tmp_path, "good", GOOD, module="good_model_a")
    cls = _execution.load_trial_class("good_model_a:MyTrial", str(root))
    assert issubclass(cls, det.Trial) and cls.__name__ == "MyTrial"


def test_same_module_name_from_another_dir_is_reimported(tmp_path: pathlib.Path) -> None:
    first = _model_dir(tmp_path, "one", GOOD, module="shared_name_model")
    second = _model_dir(tmp_path, "two", GOOD.replace("OtherTrial", "ThirdTrial"), module="shared_name_model")
    assert _execution.load_trial_class("shared_name_model:OtherTrial", str(first))
    assert _execution.load_trial_class("shared_name_model:ThirdTrial", str(second)).__name__ == "ThirdTrial"


def test_missing_module(tmp_path: pathlib.Path) -> None:
    root = _model_dir(tmp_path, "m", GOOD, module="present_module")
    with pytest.raises(errors.InvalidTrialError, match=r"no module 'absent_module'.*present_module.py"):
        _execution.load_trial_class("absent_module:MyTrial", str(root))


def test_missing_class_lists_trials(tmp_path: pathlib.Path) -> None:
    root = _model_dir(tmp_path, "c", GOOD, module="listing_model")
    with pytest.raises(errors.InvalidTrialError, match=r"has no 'Nope'; Trial classes defined there: MyTrial, OtherTrial"):
        _execution.load_trial_class("listing_model:Nope", str(root))


def test_not_a_trial(tmp_path: pathlib.Path) -> None:
    root = _model_dir(tmp_path, "n", GOOD, module="not_trial_model")
    with pytest.raises(errors.InvalidTrialError, match="Helper is not a subclass of det.Trial"):
        _execution.load_trial_class("not_trial_model:Helper", str(root))


def test_error_inside_user_module_shows_its_traceback(tmp_path: pathlib.Path) -> None:
    source = '''
    import determined as det

    def compute():
        return 1 / 0

    VALUE = compute()
    '''
    root = _model_dir(tmp_path, "e", source, module="broken_model")
    with pytest.raises(errors.InvalidTrialError) as info:
        _execution.load_trial_class("broken_model:MyTrial", str(root))
    text = str(info.value)
    assert "importing the model code failed" in text
    assert "broken_model.py" in text and "return 1 / 0" in text and "ZeroDivisionError" in text


def test_missing_dependency_of_user_module_is_a_user_error(tmp_path: pathlib.Path) -> None:
    root = _model_dir(tmp_path, "d", "import package_that_does_not_exist_xyz\n", module="dep_model")
    with pytest.raises(errors.InvalidTrialError, match="(?s)importing the model code failed.*package_that_does_not_exist_xyz"):
        _execution.load_trial_class("dep_model:MyTrial", str(root))


@pytest.mark.parametrize("bad", ["model_def", "model_def:", ":Trial", "a:b:c"])
def test_bad_entrypoint_format(tmp_path: pathlib.Path, bad: str) -> None:
    with pytest.raises(errors.InvalidTrialError, match="must look like 'module.path:TrialClass'"):
        _execution.load_trial_class(bad, str(tmp_path))
