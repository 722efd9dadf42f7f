"""`det checkpoint`, `det experiment lc|download|set gc-policy` and `det trial download` on real experiments."""
import json
import pathlib
from typing import Any, Dict, List

import pytest

from tests.client import _trained
from tests.client.conftest import Env
from tests.e2e._helpers import det as det_process
from tests.client._cli import cli_fails as _fails, det, det_json

pytestmark = pytest.mark.slow


def _checkpoints(experiment_id: int) -> List[Dict[str, Any]]:
    return det_json("experiment", "list-checkpoints", str(experiment_id))


def test_list_and_download_experiment_checkpoints(env: Env, tmp_path: pathlib.Path) -> None:
    exp_id = env.trained.experiment_id
    all_ckpts = _checkpoints(exp_id)
    assert len(all_ckpts) == 12
    # Best first; equal accuracies (common on this small validation set) put the later checkpoint first.
    validated = sorted((c for c in all_ckpts if c["validation_metrics"]),
                       key=lambda c: (-c["validation_metrics"]["validation_accuracy"], -c["steps_completed"], c["uuid"]))
    best2 = det_json("experiment", "lc", str(exp_id), "--best", "2")
    assert [c["uuid"] for c in best2] == [c["uuid"] for c in validated[:2]]
    table = det("experiment", "lc", str(exp_id), check=True).stdout
    assert "validation_accuracy" in table and all_ckpts[0]["uuid"] in table

    out = tmp_path / "top"
    proc = det("experiment", "download", str(exp_id), "--top-n", "2", "-o", str(out), check=True)
    per_trial: Dict[int, Dict[str, Any]] = {}
    for c in validated:
        per_trial.setdefault(c["trial_id"], c)
    expected = [c["uuid"] for c in per_trial.values()][:2]
    assert sorted(p.name for p in out.iterdir()) == sorted(expected)
    for uuid in expected:
        assert (out / uuid / "state_dict.pth").is_file() and (out / uuid / "metadata.json").is_file()
        assert str(out / uuid) in proc.stdout
    _fails(det("experiment", "download", str(exp_id), "--top-n", "0"), "--top-n")
    _fails(det("experiment", "download", "999"), "999")
    _fails(det("experiment", "lc", "999"), "999")


def test_checkpoint_describe_and_download(env: Env, tmp_path: pathlib.Path) -> None:
    ckpt = _checkpoints(env.trained.experiment_id)[0]
    described = det_json("checkpoint", "describe", ckpt["uuid"])
    assert described["uuid"] == ckpt["uuid"] and "model_versions" in described
    model = f"{env.mode}-cli-ckpt-model"
    det("model", "create", model, check=True)
    det("model", "register-version", model, ckpt["uuid"], check=True)
    assert {"model_name": model, "version": 1} in det_json("checkpoint", "describe", ckpt["uuid"])["model_versions"]
    assert "Model versions" in det("checkpoint", "describe", ckpt["uuid"], check=True).stdout

    proc = det_process("checkpoint", "download", ckpt["uuid"], check=True)  # the real `det`; the cwd is tmp_path
    path = pathlib.Path("checkpoints", ckpt["uuid"])
    assert str(path) in proc.stdout
    meta = json.loads((path / "metadata.json").read_text())
    assert (meta["trial_id"], meta["experiment_id"]) == (ckpt["trial_id"], env.trained.experiment_id)
    assert (path / "code" / "ckpt_probe.py").is_file()
    quiet = det("checkpoint", "download", ckpt["uuid"], "-o", str(tmp_path / "q"), "-q", check=True).stdout
    assert quiet.strip() == str(tmp_path / "q")
    _fails(det("checkpoint", "download", "no-such-uuid"), "no-such-uuid")
    _fails(det("checkpoint", "describe", "no-such-uuid"), "no-such-uuid")


def test_trial_download(env: Env, tmp_path: pathlib.Path) -> None:
    ckpts = _checkpoints(env.trained.experiment_id)
    trial_id = ckpts[0]["trial_id"]
    mine = [c for c in ckpts if c["trial_id"] == trial_id]
    latest = max(mine, key=lambda c: c["steps_completed"])
    lowest_loss = min((c for c in mine if c["validation_metrics"]),
                      key=lambda c: c["validation_metrics"]["validation_loss"])

    out = det("trial", "download", str(trial_id), "--latest", "-o", str(tmp_path / "latest"), "-q", check=True)
    assert out.stdout.strip() == str(tmp_path / "latest")
    assert json.loads((tmp_path / "latest" / "metadata.json").read_text())["trial_id"] == trial_id
    assert (tmp_path / "latest" / "state_dict.pth").read_bytes() == (
        env.trained.data_dir / "checkpoints" / latest["uuid"] / "state_dict.pth").read_bytes()
    det("trial", "download", str(trial_id), "--best", "--sort-by", "validation_loss", "--smaller-is-better", "true",
        "-o", str(tmp_path / "best"), check=True)
    assert (tmp_path / "best" / "state_dict.pth").read_bytes() == (
        env.trained.data_dir / "checkpoints" / lowest_loss["uuid"] / "state_dict.pth").read_bytes()
    det("trial", "download", str(trial_id), "--uuid", mine[0]["uuid"], check=True)
    assert pathlib.Path("checkpoints", mine[0]["uuid"], "metadata.json").is_file()

    _fails(det("trial", "download", str(trial_id)), "--best --latest --uuid")
    _fails(det("trial", "download", str(trial_id), "--latest", "--best"), "not allowed")
    _fails(det("trial", "download", str(trial_id), "--latest", "--sort-by", "validation_loss"), "only go with --best")
    _fails(det("trial", "download", str(trial_id), "--best", "--sort-by", "x", "--smaller-is-better", "maybe"), "maybe")
    _fails(det_process("trial", "download", "999", "--latest"), "999")
    other = next(c for c in ckpts if c["trial_id"] != trial_id)
    _fails(det("trial", "download", str(trial_id), "--uuid", other["uuid"]), "belongs to trial")
    assert not (tmp_path / "checkpoints" / other["uuid"]).exists()


def test_set_gc_policy(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained = _trained.train(tmp_path, max_trials=1, length=20)
    monkeypatch.setenv("DET_DATA_DIR", str(trained.data_dir))
    exp = str(trained.experiment_id)
    ckpts = _checkpoints(trained.experiment_id)
    assert [c["steps_completed"] for c in ckpts] == [10, 20]
    policy = ["--save-experiment-best", "0", "--save-trial-best", "0", "--save-trial-latest", "1"]

    refused = det("experiment", "set", "gc-policy", exp, *policy, stdin="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stdout
    assert ckpts[0]["uuid"] in refused.stdout and ckpts[1]["uuid"] not in refused.stdout, "the preview"
    assert [c["state"] for c in _checkpoints(trained.experiment_id)] == ["COMPLETED", "COMPLETED"]

    done = det("experiment", "set", "gc-policy", exp, *policy, "--yes", check=True)
    assert ckpts[0]["uuid"] in done.stdout
    assert [c["state"] for c in _checkpoints(trained.experiment_id)] == ["DELETED", "COMPLETED"]
    assert not (trained.data_dir / "checkpoints" / ckpts[0]["uuid"]).exists()
    assert (trained.data_dir / "checkpoints" / ckpts[1]["uuid"]).is_dir()
    config = det_json("experiment", "describe", exp)["config"]["checkpoint_storage"]
    assert (config["save_trial_best"], config["save_trial_latest"]) == (0, 1)

    _fails(det("experiment", "set", "gc-policy", exp), "--save-trial-latest")
    _fails(det("experiment", "set", "gc-policy", exp, "--save-trial-best", "-1", "--yes"), "0 or more")
    _fails(det("experiment", "set", "gc-policy", "999", "--save-trial-best", "1", "--yes"), "999")
