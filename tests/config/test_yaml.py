"""Configs are read as YAML 1.2 (as Determined's CLI read them), within bounds that hostile input cannot pass."""
import os
import pathlib
import resource
import subprocess
import sys
import time
import tracemalloc

import pytest

from determined.config import (
    ConfigFileError,
    config_from,
    load_config_file,
    load_config_text,
    load_experiment_config,
    parse_yaml,
)
from determined.config import files

NUMBERS = """
learning_rate: 1e-4
big: 1E5
half: .5
negative: -.5e3
dotted: 1.
octal_looking: 010
octal: 0o17
hex: 0x1F
signed: +12
infinite: -.inf
yes_word: yes
no_word: No
on_word: on
off_word: OFF
y_word: y
true_word: True
false_word: FALSE
null_word: ~
empty:
date: 2020-01-01
quoted: '1e-4'
underscored: 1_000
"""


def test_yaml_1_2_numbers_and_booleans() -> None:
    data = parse_yaml(NUMBERS)
    assert data["learning_rate"] == 1e-4 and isinstance(data["learning_rate"], float)
    assert data["big"] == 100000.0 and isinstance(data["big"], float)
    assert data["half"] == 0.5 and data["negative"] == -500.0 and data["dotted"] == 1.0
    assert data["octal_looking"] == 10 and data["octal"] == 15 and data["hex"] == 31 and data["signed"] == 12
    assert data["infinite"] == float("-inf")
    for word in ("yes_word", "no_word", "on_word", "off_word", "y_word"):
        assert isinstance(data[word], str), word  # YAML 1.1 booleans stay strings in YAML 1.2
    assert data["true_word"] is True and data["false_word"] is False
    assert data["null_word"] is None and data["empty"] is None
    assert data["date"] == "2020-01-01" and data["quoted"] == "1e-4" and data["underscored"] == "1_000"


def test_learning_rate_1e_4_reaches_the_canonical_config_as_a_float(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "entrypoint: m:T\nhyperparameters:\n  lr: 1e-4\n  decay: {type: double, minval: 1e-6, maxval: .5}\n"
        "  tag: yes\nsearcher: {name: single, metric: loss, max_length: {batches: 1e2}}\n"
    )
    config = load_experiment_config(load_config_file(path))
    assert config["hyperparameters"]["lr"] == {"type": "const", "val": 0.0001}
    assert config["hyperparameters"]["decay"]["minval"] == 1e-6 and config["hyperparameters"]["decay"]["maxval"] == 0.5
    assert config["hyperparameters"]["tag"] == {"type": "const", "val": "yes"}
    assert config["searcher"]["max_length"] == {"batches": 100}  # an integral float is an int length


def test_fields_that_must_be_bools_take_yaml_1_1_words_as_determined_masters_did() -> None:
    raw = load_config_text("entrypoint: m:T\nperform_initial_validation: yes\n"
                           "searcher: {name: single, metric: m, max_length: 5, smaller_is_better: off}\n")
    config = load_experiment_config(raw)
    assert config["perform_initial_validation"] is True and config["searcher"]["smaller_is_better"] is False


def _billion_laughs(levels: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_fast_with_bounded_memory() -> None:
    text = _billion_laughs(10)  # 10**10 strings once expanded
    tracemalloc.start()
    try:
        with pytest.raises(ConfigFileError) as info:
            parse_yaml(text, "laughs.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (problem,) = info.value.problems
    assert problem.startswith("laughs.yaml:5:5:")  # a4, the first list whose expansion (111,111 values) is too big
    assert f"expand the config past {files.MAX_EXPANDED_NODES} values" in problem
    assert peak < 5 * 1024 * 1024


def test_a_long_string_repeated_by_aliases_is_bounded_too() -> None:
    text = "s: &s " + "x" * 100_000 + "\n" + "l: [" + ", ".join(["*s"] * 60) + "]\n"
    with pytest.raises(ConfigFileError, match="MiB of text"):
        parse_yaml(text)


def test_the_cli_refuses_a_billion_laughs_config_in_bounded_memory(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text("entrypoint: m:T\nsearcher: {name: single, metric: m, max_length: 5}\n" + _billion_laughs(9))

    def limit_memory() -> None:  # the old loader reached 1.9 GB; this must fail within 1 GiB of address space
        resource.setrlimit(resource.RLIMIT_AS, (1024**3, 1024**3))

    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "determined.cli.main", "preview-search", str(path)],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit_memory,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode != 0
    assert f"{path}:7:5:" in proc.stderr and "aliases (*name) here expand the config" in proc.stderr, proc.stderr
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "text, what",
    [
        ("x: " + "[" * 70 + "]" * 70 + "\n", "values nested more than 64 levels deep"),
        ("a: &a [*a]\n", "an alias refers to a value that contains it"),
        ("base: &b 1\nl: [" + ", ".join(["*b"] * (files.MAX_ALIASES + 1)) + "]\n", "more than 1000 aliases"),
        ("a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30 + "\n",
         "aliases nest values more than 64"),
    ],
)
def test_depth_and_alias_bounds_name_the_line(text: str, what: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_yaml(text, "bad.yaml")
    (problem,) = info.value.problems
    assert problem.startswith("bad.yaml:") and what in problem


def test_size_bound(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("data:\n  blob: '" + "x" * files.MAX_CONFIG_BYTES + "'\n")
    with pytest.raises(ConfigFileError, match="more than the 1024 KiB a config may have"):
        load_config_file(path)
    with pytest.raises(ConfigFileError, match="more than the 1024 KiB a config may have"):
        parse_yaml(path.read_text())


def test_ordinary_aliases_and_merge_keys_work() -> None:
    data = parse_yaml("defaults: &d {lr: 1e-3, momentum: .9}\nopt_a:\n  <<: *d\n  lr: 1e-2\nopt_b: *d\n")
    assert data["opt_a"] == {"lr": 0.01, "momentum": 0.9} and data["opt_b"] == {"lr": 0.001, "momentum": 0.9}


def test_config_from_a_dict_a_path_or_yaml_text(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("entrypoint: m:T\nhyperparameters: {lr: 1e-4}\n")
    assert config_from({"a": 1}) == {"a": 1}
    assert config_from(str(path))["hyperparameters"]["lr"] == 1e-4
    assert config_from(path)["hyperparameters"]["lr"] == 1e-4
    assert config_from("hyperparameters:\n  lr: .5\n") == {"hyperparameters": {"lr": 0.5}}
    with pytest.raises(ConfigFileError, match="neither an existing file nor YAML text"):
        config_from("no-such-file.yaml")
    with pytest.raises(ConfigFileError, match="got a int"):
        config_from(3)


def test_master_config_file_is_read_the_same_way(tmp_path: pathlib.Path) -> None:
    from determined import errors
    from determined.cli.master import _load_config_file

    path = tmp_path / "master.yaml"
    path.write_text("port: 0x1F90\npreemption_timeout: 1e1\n")
    assert _load_config_file(str(path)) == {"port": 8080, "preemption_timeout": 10.0}
    path.write_text(_billion_laughs(9))
    with pytest.raises(errors.DeterminedError, match=r"cannot read the master config(.|\n)*master.yaml:5:5: the aliases"):
        _load_config_file(str(path))
