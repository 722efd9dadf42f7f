"""`det preview-search` through the real console script: no master, nothing run, nothing written."""
import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict

import pytest
import yaml

DET = pathlib.Path(sys.executable).parent / "det"


def write(tmp_path: pathlib.Path, searcher: Dict[str, Any], **extra: Any) -> pathlib.Path:
    cfg = {"entrypoint": "model_def:Trial", "records_per_epoch": 1000, "hyperparameters": {"global_batch_size": 32},
           "searcher": {"metric": "validation_loss", **searcher}, **extra}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def det(*args: str) -> subprocess.CompletedProcess:
    # a master URL nobody listens on: preview must not need one
    env = {**os.environ, "DET_MASTER": "http://127.0.0.1:9"}
    return subprocess.run([str(DET), *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(autouse=True)
def _need_console_script() -> None:
    assert DET.exists(), f"the det console script is not installed next to {sys.executable}"


def test_preview_asha_epochs_text_and_json(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    path = write(tmp_path, {"name": "adaptive_asha", "max_length": {"epochs": 32}, "max_trials": 16})
    proc = det("preview-search", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Searcher: adaptive_asha (metric validation_loss, smaller is better)")
    rows = [line.split() for line in lines if line[:1].isdigit()]
    assert rows[0][:4] == ["1", "3", "12", "4"] and " ".join(rows[0][4:]) == "2, 8, 32"
    assert rows[1][:4] == ["2", "2", "4", "4"] and " ".join(rows[1][4:]) == "8, 32"
    data = json.loads(det("preview-search", str(path), "--json").stdout)
    assert [b["trials"] for b in data["brackets"]] == [12, 4]
    assert [b["concurrency"] for b in data["brackets"]] == [4, 4]
    assert not det_data_dir.exists()  # nothing was run or recorded


def test_preview_asha_batches_512_and_aggressive(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, {"name": "adaptive_asha", "max_length": {"batches": 6400}, "max_trials": 512})
    data = json.loads(det("preview-search", str(path), "--json").stdout)
    assert [(b["rungs"], b["trials"]) for b in data["brackets"]] == [(5, 363), (4, 112), (3, 37)]
    assert data["brackets"][0]["rung_lengths"] == [25, 100, 400, 1600, 6400]
    path = write(tmp_path, {"name": "adaptive_asha", "max_length": {"batches": 6400}, "max_trials": 512,
                            "mode": "aggressive"})
    proc = det("preview-search", str(path))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line[:1].isdigit()]
    assert rows == [["1", "5", "512", "512", "25,", "100,", "400,", "1600,", "6400"]]


def test_bad_config_is_reported_like_other_commands(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, {"name": "adaptive_asha", "max_length": {"batches": 100}, "max_trials": 0})
    proc = det("preview-search", str(path))
    assert proc.returncode == 1
    assert "Error: invalid experiment config" in proc.stderr and "searcher.max_trials" in proc.stderr
    assert "Traceback" not in proc.stderr
    missing = det("preview-search", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    too_many = write(tmp_path, {"name": "adaptive_asha", "max_length": {"batches": 100}, "max_trials": 2,
                                "bracket_rungs": [3, 2, 1]})
    proc = det("preview-search", str(too_many))
    assert proc.returncode == 1 and "Error: cannot preview the search" in proc.stderr and "max_trials is 2" in proc.stderr
