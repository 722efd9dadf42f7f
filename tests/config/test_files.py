import pytest

from determined.config import ConfigFileError, InvalidExperimentConfig, load_config_file, load_experiment_config


def write(tmp_path, text, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_a_mapping(tmp_path):
    path = write(tmp_path, """
entrypoint: model_def:Trial
hyperparameters:
  global_batch_size: 32
  lr: {type: log, minval: -4, maxval: -1}
searcher:
  name: single
  metric: loss
  max_length:
    batches: 100
""")
    raw = load_config_file(path)
    assert raw["searcher"]["max_length"] == {"batches": 100}
    assert load_experiment_config(raw)["hyperparameters"]["lr"]["base"] == 10.0
    assert load_config_file(str(path)) == raw


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "entrypoint: model_def:Trial\nsearcher:\n  name: single\n   metric: loss\n")
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}:4:")
    assert "YAML error: mapping values are not allowed here" in problem
    assert isinstance(info.value, InvalidExperimentConfig)


def test_unclosed_bracket(tmp_path):
    path = write(tmp_path, "a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigFileError, match="YAML error"):
        load_config_file(path)


def test_duplicate_key_names_both_lines(tmp_path):
    path = write(tmp_path, "searcher:\n  name: single\n  name: random\n")
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}:3:")
    assert "duplicate key 'name' (first given on line 2)" in problem


def test_merge_keys_still_work(tmp_path):
    path = write(tmp_path, "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert load_config_file(path)["other"] == {"x": 1, "y": 3}


@pytest.mark.parametrize(
    "text, what",
    [("- a\n- b\n", "the document is a list"), ("just text\n", "the document is a single value"),
     ("", "the file is empty"), ("# only a comment\n", "the file is empty")],
)
def test_non_mapping_documents(tmp_path, text, what):
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path)
    assert str(path) in info.value.problems[0] and what in info.value.problems[0]


def test_two_documents(tmp_path):
    path = write(tmp_path, "a: 1\n---\nb: 2\n")
    with pytest.raises(ConfigFileError, match="expected a single document"):
        load_config_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigFileError) as info:
        load_config_file(tmp_path / "nope.yaml")
    assert info.value.problems == [f"{tmp_path / 'nope.yaml'}: no such file; give the path of an existing YAML "
                                   "config file"]
