"""`det.get_cluster_info()`, `det.LOG_FORMAT` and `det.import_from_path`: the trial's identity as Determined 0.38
scripts read it, from the environment the harness gives them."""
import importlib
import json
import os
import pathlib
import sys
from typing import Any, Dict

import pytest

import determined as det
from determined import core
from determined.core import _info

CONFIG: Dict[str, Any] = {"searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
                          "data": {"url": "s3://bucket/data"}, "debug": True, "entrypoint": "python3 train.py"}
ANSWER: Dict[str, Any] = {
    "trial_id": 7, "experiment_id": 3, "config": CONFIG, "hparams": {"lr": 0.1, "optim": {"name": "sgd"}},
    "trial_seed": 1234, "latest_checkpoint": {"uuid": "ckpt-1", "steps_completed": 40}, "steps_completed": 40,
    "trial_run_id": 2, "cluster_id": "c0ffee",
}
RUN_ENV = {"DET_MASTER": "http://127.0.0.1:8080", "DET_ALLOCATION_ID": "alloc-9", "DET_SESSION_TOKEN": "tok",
           "DET_SLOT_IDS": "[2, 3]", "DET_CONTAINER_ADDRS": '["10.0.0.1", "10.0.0.2"]', "DET_CONTAINER_RANK": "1",
           "DET_CONTAINER_SLOT_COUNTS": "[2, 2]", "DET_AGENT_ID": "node-b", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture
def trial_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Dict[str, str]:
    """The environment of a script started by the harness for ANSWER's trial."""
    info = core.ClusterInfo._from_answer(ANSWER, environ=RUN_ENV)
    env = {**RUN_ENV, **_info.trial_environment(info, str(tmp_path))}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def test_none_outside_a_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DET_MASTER", "DET_TRIAL_ID"):
        monkeypatch.delenv(name, raising=False)
    assert det.get_cluster_info() is None


def test_the_038_fields_from_the_trials_environment(trial_env: Dict[str, str]) -> None:
    info = det.get_cluster_info()
    assert isinstance(info, det.ClusterInfo) and det.ClusterInfo is core.ClusterInfo  # one object model
    assert (info.master_url, info.allocation_id, info.session_token, info.task_type) == (
        "http://127.0.0.1:8080", "alloc-9", "tok", "TRIAL")
    assert (info.cluster_id, info.agent_id, info.slot_ids, info.task_id) == ("c0ffee", "node-b", [2, 3], "3.7")
    assert (info.container_addrs, info.container_rank, info.container_slot_counts) == (
        ["10.0.0.1", "10.0.0.2"], 1, [2, 2])
    assert info.latest_checkpoint == "ckpt-1" and info.user_data == {"url": "s3://bucket/data"}
    assert info.gpu_uuids == []  # CPU slots
    trial = info.trial
    assert (trial.trial_id, trial.experiment_id, trial.trial_seed) == (7, 3, 1234)
    assert trial.hparams == {"lr": 0.1, "optim": {"name": "sgd"}}  # nested, as configured
    assert trial._config == CONFIG and trial.config == CONFIG
    assert (trial._steps_completed, trial._trial_run_id, trial._debug) == (40, 2, True)
    assert trial_env["DET_HPARAMS"] == json.dumps(ANSWER["hparams"]) and trial_env["DET_RESOURCES_ID"] == "alloc-9.1"
    assert det.get_cluster_info() is info  # read once per run


def test_a_large_config_travels_in_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    big = dict(CONFIG, data={"blob": "x" * (_info.MAX_ENV_VALUE + 1)})
    info = core.ClusterInfo._from_answer(dict(ANSWER, config=big), environ=RUN_ENV)
    env = _info.trial_environment(info, str(tmp_path / "run"))
    assert "DET_EXPERIMENT_CONFIG" not in env and pathlib.Path(env["DET_EXPERIMENT_CONFIG_FILE"]).is_file()
    assert core.ClusterInfo._from_env({**RUN_ENV, **env}).user_data == big["data"]


def test_a_trial_process_without_the_variables_asks_the_master(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []
    monkeypatch.setattr(_info, "_ask_master", lambda master, trial_id: asked.append((master, trial_id))
                        or core.ClusterInfo._from_answer(ANSWER, master, RUN_ENV))
    for name in ("DET_EXPERIMENT_CONFIG", "DET_HPARAMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", "http://127.0.0.1:9")
    monkeypatch.setenv("DET_TRIAL_ID", "7")
    monkeypatch.setenv("DET_ALLOCATION_ID", "alloc-fresh")
    assert det.get_cluster_info().trial.trial_id == 7 and asked == [("http://127.0.0.1:9", 7)]


def test_log_format_is_determineds() -> None:
    assert det.LOG_FORMAT == "%(levelname)s: [%(process)s] %(name)s: %(message)s"


def _module(directory: pathlib.Path, name: str, value: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(f"VALUE = {value!r}\n")


def test_import_from_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    current, checkpoint = tmp_path / "current", tmp_path / "ckpt" / "code"
    _module(current, "model_def_x", "today")
    _module(current, "only_here_x", "cwd")
    _module(checkpoint, "model_def_x", "checkpoint")
    monkeypatch.chdir(current)
    monkeypatch.syspath_prepend(str(current))
    import model_def_x as new  # type: ignore[import-not-found]

    with det.import_from_path(checkpoint):
        import model_def_x as old  # type: ignore[import-not-found]

        with pytest.raises(ImportError):  # the current directory is hidden inside the block
            importlib.import_module("only_here_x")
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with det.import_from_path(tmp_path):
                pass
    assert (new.VALUE, old.VALUE) == ("today", "checkpoint") and new is not old
    assert sys.modules["model_def_x"] is new  # today's module is back
    assert not (checkpoint / "__pycache__").exists()  # nothing written into the checkpoint
    assert str(checkpoint) not in sys.path and os.getcwd() == str(current)
