"""`--config KEY=VALUE` overrides and config templates: Determined 0.38's parsing and merge rules."""
import pytest

from determined.config import InvalidExperimentConfig
from determined.config.overrides import apply_overrides, merge_template, parse_override


def test_override_values_are_yaml_typed() -> None:
    assert parse_override("resources.slots_per_trial=4") == (["resources", "slots_per_trial"], 4)
    assert parse_override("a=0.5")[1] == 0.5 and parse_override("a=true")[1] is True
    assert parse_override("a=null")[1] is None and parse_override("a=x=y")[1] == "x=y"
    assert parse_override("labels=a, 2,true")[1] == ["a", 2, True]
    assert parse_override("a=[1, {b: 2}]")[1] == [1, {"b": 2}]
    assert parse_override("a={b: [1]}")[1] == {"b": [1]}
    assert parse_override("bind_mounts={host_path: /a, container_path: /b}")[1] == [
        {"host_path": "/a", "container_path": "/b"}]
    assert parse_override("description=")[1] == ""


def test_overrides_merge_by_dotted_path() -> None:
    config = {"searcher": {"name": "single", "max_length": {"batches": 8}}, "resources": None, "name": "x"}
    out = apply_overrides(config, ["searcher.max_length.batches=4", "resources.slots_per_trial=2",
                                   "hyperparameters.lr=0.1", "searcher={metric: loss}"])
    assert out == {"searcher": {"name": "single", "max_length": {"batches": 4}, "metric": "loss"},
                   "resources": {"slots_per_trial": 2}, "hyperparameters": {"lr": 0.1}, "name": "x"}
    assert config["searcher"]["max_length"] == {"batches": 8}, "the input is not changed"


@pytest.mark.parametrize("text,needle", [
    ("searcher", "expected KEY=VALUE"),
    ("=3", "not a dotted path"),
    ("a..b=3", "not a dotted path"),
    ("name.first=x", "name is 'x', not a mapping"),
    ("a=[1, 2", "--config a"),
])
def test_bad_overrides_are_clear_errors(text: str, needle: str) -> None:
    with pytest.raises(InvalidExperimentConfig) as info:
        apply_overrides({"name": "x"}, [text])
    assert needle in str(info.value)


def test_template_merge_rules() -> None:
    template = {
        "description": "from the template", "labels": ["t"], "data": {"url": "t", "size": 1},
        "bind_mounts": [{"host_path": "/t1", "container_path": "/a"}, {"host_path": "/t2", "container_path": "/b"}],
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}, "group": {"x": 1, "y": 2},
                            "only_template": 3},
    }
    config = {
        "labels": ["c"], "data": {"url": "c"},
        "bind_mounts": [{"host_path": "/c", "container_path": "/b"}],
        "hyperparameters": {"lr": {"type": "const", "val": 0.5}, "group": {"y": 20, "z": 30}},
    }
    assert merge_template(config, template) == {
        "description": "from the template",
        "labels": ["c"],  # lists come from the config
        "data": {"url": "c", "size": 1},  # maps merge, the config wins
        "bind_mounts": [{"host_path": "/t1", "container_path": "/a"}, {"host_path": "/c", "container_path": "/b"}],
        "hyperparameters": {"lr": {"type": "const", "val": 0.5},  # a hyperparameter is the config's ...
                            "group": {"x": 1, "y": 20, "z": 30},  # ... unless both are groups
                            "only_template": 3},
    }
