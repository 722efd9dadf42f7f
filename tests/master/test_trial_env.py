"""What a trial process starts with (rm/trial_env.py) and where a server keeps checkpoints (storage_roots.py)."""
import os
import pathlib

import pytest

from determined import errors
from determined.master.storage import storage_roots
from determined.config import environment_variables
from determined.master.rm.local import LocalResourceManager
from determined.master.rm.trial_env import TrialUser, inherited_environment, trial_environment

MASTER_ENV = {
    "PATH": "/usr/bin", "HOME": "/root", "USER": "root", "LANG": "C.UTF-8", "LC_ALL": "C", "PYTHONPATH": "/p",
    "CUDA_HOME": "/cuda", "OMP_NUM_THREADS": "4", "HTTPS_PROXY": "http://proxy", "DET_DATA_DIR": "/data",
    "DET_DB_URL": "postgresql://det:pw@db/det", "AWS_SECRET_ACCESS_KEY": "aws", "MY_API_TOKEN": "t",
    "RANK": "3", "MASTER_ADDR": "10.0.0.1", "DET_COLLECTIVE_TIMEOUT_S": "60", "XDG_DATA_HOME": "/xdg",
}


def test_trials_get_an_allow_list_of_the_masters_environment() -> None:
    env = trial_environment(MASTER_ENV)
    assert env == {"PATH": "/usr/bin", "HOME": "/root", "USER": "root", "LANG": "C.UTF-8", "LC_ALL": "C",
                   "PYTHONPATH": "/p", "CUDA_HOME": "/cuda", "OMP_NUM_THREADS": "4", "HTTPS_PROXY": "http://proxy",
                   "DET_COLLECTIVE_TIMEOUT_S": "60", "AWS_SECRET_ACCESS_KEY": "aws", "PYTHONUNBUFFERED": "1",
                   "DET_DATA_DIR": "/data", "XDG_DATA_HOME": "/xdg"}
    user = TrialUser("runner", 1234, 1234, (1234,), "/home/runner")
    isolated = trial_environment(MASTER_ENV, user=user, home="/work/.home")
    assert "AWS_SECRET_ACCESS_KEY" not in isolated and "DET_DB_URL" not in isolated and "MY_API_TOKEN" not in isolated
    assert (isolated["HOME"], isolated["USER"], isolated["LOGNAME"]) == ("/work/.home", "runner", "runner")
    assert "DET_DATA_DIR" not in isolated and "XDG_DATA_HOME" not in isolated


def test_the_experiments_variables_for_its_slot_kind() -> None:
    config = {"environment": {"environment_variables": {"cpu": ["A=1", "B=x=y"], "gpu": ["G=1"]}}}
    assert environment_variables(config, "cpu") == {"A": "1", "B": "x=y"}
    assert environment_variables(config, "cuda") == {"G": "1"}  # Determined's key is cuda; gpu is read too
    assert environment_variables({}, "cpu") == {}


def test_storage_roots_never_include_the_data_dir(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    own = storage_roots.default_roots(data)
    assert own == [str(data / "checkpoints")]
    assert storage_roots.resolve_roots(own + [str(tmp_path / "shared")], data) == [data / "checkpoints",
                                                                                   tmp_path / "shared"]
    for bad, why in ((str(tmp_path), "contains the master's data dir"), (str(data / "work"), "inside the master's"),
                     ("relative/dir", "not an absolute directory"), ("/", "contains")):
        with pytest.raises(errors.DeterminedError, match=why):
            storage_roots.resolve_roots([bad], data)
    roots = storage_roots.resolve_roots([str(tmp_path / "shared")], data)
    assert storage_roots.storage_problems({"type": "shared_fs", "host_path": str(tmp_path / "shared" / "team")},
                                          roots, data) == []
    assert storage_roots.storage_problems({"type": "s3", "bucket": "b"}, roots, data) == []
    (tmp_path / "shared").mkdir()
    os.symlink(data, tmp_path / "shared" / "link")
    [problem] = storage_roots.storage_problems({"type": "shared_fs", "host_path": str(tmp_path / "shared" / "link")},
                                               roots, data)
    assert "inside the master's data dir" not in problem and str(data) in problem and str(tmp_path / "shared") in problem


def test_only_canonical_uuids_are_checkpoint_ids() -> None:
    assert storage_roots.is_checkpoint_uuid("6b1f0c9e-2a47-4d3b-9c8e-1f2a3b4c5d6e")
    for bad in ("6B1F0C9E-2A47-4D3B-9C8E-1F2A3B4C5D6E", "6b1f0c9e2a474d3b9c8e1f2a3b4c5d6e", "..", "checkpoints",
                "{6b1f0c9e-2a47-4d3b-9c8e-1f2a3b4c5d6e}", None, 7):
        assert not storage_roots.is_checkpoint_uuid(bad), bad


def test_an_embedded_masters_trials_inherit_its_users_environment_but_its_det_variables() -> None:
    env = inherited_environment({**MASTER_ENV, "DET_MASTER": "http://other:8080", "HF_HOME": "/cache/hf"})
    assert env["MY_API_TOKEN"] == "t" and env["HF_HOME"] == "/cache/hf" and env["RANK"] == "3"
    assert "DET_DB_URL" not in env and "DET_MASTER" not in env
    assert env["DET_DATA_DIR"] == "/data" and env["DET_COLLECTIVE_TIMEOUT_S"] == "60" and env["PYTHONUNBUFFERED"] == "1"


def test_which_resource_manager_inherits(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_DATASET_DIR", "/datasets")
    monkeypatch.setenv("DET_DB_URL", "postgresql://det:pw@db/det")
    embedded = LocalResourceManager(str(tmp_path / "a"), lambda *a: None, prestart=0, inherit_environment=True)
    server = LocalResourceManager(str(tmp_path / "b"), lambda *a: None, prestart=0)
    assert embedded.base_env()["MY_DATASET_DIR"] == "/datasets" and "DET_DB_URL" not in embedded.base_env()
    assert "MY_DATASET_DIR" not in server.base_env() and "DET_DB_URL" not in server.base_env()
