"""The Core API of Determined 0.38 with real trial processes on an embedded master: a script entrypoint
(`python3 train.py`; two ranks through `determined.launch.torch_distributed`) that reports every kind of metric, checkpoints with store_path and restores with restore_path; progress; INVALID_HP
replacements; the time-based ASHA that stops losers through preemption; sharded checkpoints of two ranks; the
profiler."""
import json
import pathlib
from typing import Any, Dict

import pytest

from determined import master
from determined.cli import _render
from determined.cli.main import main as det_main
from determined.common.api import Session
from determined.master.rm import Slots
from tests.master._helpers import model_def, wait_for

pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).with_name("_core_script.py").read_text()


def config(searcher: Dict[str, Any], tmp: pathlib.Path, **hparams: Any) -> Dict[str, Any]:
    """A script experiment as Determined 0.38 has them: the entrypoint is the command that runs train.py."""
    return {
        "searcher": {"metric": "validation_loss", **searcher},
        "hyperparameters": {"lr": {"type": "double", "minval": 0.05, "maxval": 0.5}, **hparams},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp), "storage_path": "ckpts"},
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
    }


@pytest.fixture(scope="module")
def em(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with master.start(tmp_path_factory.mktemp("master") / "data", slots=Slots(gpus=[], cpu_count=2),
                      preemption_timeout=20) as em:
        yield em


def create(s: Session, cfg: Dict[str, Any]) -> int:
    body = {"config": cfg, "model_definition": model_def({"train.py": SCRIPT})}
    return int(s.post("/experiments", body)["experiment"]["id"])


def experiment(s: Session, exp_id: int) -> Dict[str, Any]:
    return dict(s.get(f"/experiments/{exp_id}"))


def ended(s: Session, exp_id: int) -> bool:
    return experiment(s, exp_id)["experiment"]["state"] in ("COMPLETED", "ERROR", "CANCELED")


def logs(s: Session, trial_id: int) -> str:
    return "\n".join(line["message"] for line in s.get(f"/trials/{trial_id}/logs")["logs"])


def test_a_core_api_script_reports_every_kind_of_metric_checkpoints_and_moves_progress(
    em: Any, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = em.session()
    cfg = config({"name": "single"}, tmp_path, steps=8, wait_dir=str(tmp_path), profile=True, lr=0.5)
    exp_id = create(s, cfg)
    # report_progress moves the experiment's progress: the script waits at half way for the file `go`.
    wait_for(lambda: experiment(s, exp_id)["experiment"]["progress"] == pytest.approx(0.5), 60, "progress 0.5")
    (tmp_path / "go").write_text("")
    wait_for(lambda: ended(s, exp_id), 60, "experiment ended")
    desc = experiment(s, exp_id)
    [trial] = desc["trials"]
    assert desc["experiment"]["state"] == "COMPLETED" and trial["state"] == "COMPLETED", logs(s, trial["id"])
    assert desc["experiment"]["progress"] == 1.0 and trial["total_batches"] == 8
    assert trial["runner_status"] == "training from step 0"
    t = s.get(f"/trials/{trial['id']}")
    assert [m["steps_completed"] for m in t["training_metrics"]] == list(range(1, 9))
    losses = [m["metrics"]["validation_loss"] for m in t["validation_metrics"]]
    assert losses[-1] < losses[0] / 4  # it learns
    assert {"training", "validation", "weights", "cpu", "memory"} <= set(t["metric_groups"])
    weights = s.get(f"/trials/{trial['id']}/metrics", params={"group": "weights"})["metrics"]
    assert [m["steps_completed"] for m in weights] == list(range(1, 9))
    assert weights[-1]["metrics"]["w"] == pytest.approx(s.get(f"/trials/{trial['id']}/run_metadata")["metadata"][
        "final_w"])
    cpu = s.get(f"/trials/{trial['id']}/metrics", params={"group": "cpu"})["metrics"]
    assert cpu and 0 <= cpu[0]["metrics"]["cpu_util_simple"] <= 100  # the profiler's system metrics
    checkpoints = t["checkpoints"]  # (the one at 4 is garbage-collected at the end: save_trial_latest 1)
    assert [c["steps_completed"] for c in checkpoints] == [4, 8]
    stored = tmp_path / "ckpts" / checkpoints[-1]["uuid"]
    assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 8}
    assert json.loads((stored / "state.json").read_text())["steps"] == 8
    # `det trial describe --metrics` shows every group; without --metrics it names the other groups.
    monkeypatch.setenv("DET_MASTER", em.url)
    capsys.readouterr()
    assert det_main(["trial", "describe", str(trial["id"]), "--metrics"]) == 0
    out = capsys.readouterr().out
    assert "Metrics: weights" in out and "Metrics: cpu" in out and _render.metrics_text(weights[-1]["metrics"]) in out
    assert det_main(["trial", "describe", str(trial["id"])]) == 0
    assert "Other metric groups: cpu, disk, memory, network, weights" in capsys.readouterr().out
    assert det_main(["trial", "describe", str(trial["id"]), "--metrics", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["metrics"]["weights"] == weights and "cpu" in described["metric_groups"]
    # The group route refuses names Determined refuses.
    with pytest.raises(Exception, match="without '.'"):
        s.get(f"/trials/{trial['id']}/metrics", params={"group": "a.b"})


def test_checkpoint_and_train_context_methods_on_the_platform(em: Any, tmp_path: pathlib.Path) -> None:
    """get_metadata, download (NoSharedDownload, selector), restore_path(selector), delete; the experiment's best
    validation and the TensorBoard path, from a script on the platform."""
    s = em.session()
    exp_id = create(s, config({"name": "single"}, tmp_path, steps=4, lr=0.5, tour=True))
    wait_for(lambda: ended(s, exp_id), 60, "experiment ended")
    [trial] = experiment(s, exp_id)["trials"]
    assert trial["state"] == "COMPLETED", logs(s, trial["id"])
    seen = s.get(f"/trials/{trial['id']}/run_metadata")["metadata"]["tour"]
    assert seen["metadata"] == {"steps_completed": 4}  # the master's record of the checkpoint
    assert seen["downloaded"] == ["state.json"]  # the selector left metadata.json out
    assert seen["restored"] == ["metadata.json", "state.json"]
    best = min(m["metrics"]["validation_loss"] for m in s.get(f"/trials/{trial['id']}")["validation_metrics"])
    assert seen["best"] == pytest.approx(best)
    assert pathlib.Path(seen["tensorboard"]).is_absolute()
    scratch = s.get(f"/checkpoints/{seen['scratch']}")["checkpoint"]
    assert scratch["state"] == "DELETED" and not (tmp_path / "ckpts" / seen["scratch"]).exists()
    kept = [c["uuid"] for c in s.get(f"/trials/{trial['id']}")["checkpoints"] if c["state"] == "COMPLETED"]
    assert seen["scratch"] not in kept and (tmp_path / "ckpts" / kept[-1] / "state.json").is_file()


def test_invalid_hp_is_replaced_in_a_random_search_and_not_counted(em: Any, tmp_path: pathlib.Path) -> None:
    s = em.session()
    cfg = config({"name": "random", "max_trials": 2}, tmp_path, steps=2,
                 invalid_hp={"type": "categorical", "vals": [True, False]})
    cfg["reproducibility"] = {"experiment_seed": 5}  # both first draws are invalid
    exp_id = create(s, cfg)
    wait_for(lambda: ended(s, exp_id), 60, "experiment ended")
    desc = experiment(s, exp_id)
    states = [(t["hparams"]["invalid_hp"], t["state"]) for t in desc["trials"]]
    invalid = [st for bad, st in states if bad]
    valid = [st for bad, st in states if not bad]
    assert invalid, f"seed 5 draws invalid trials: {states}"
    assert valid == ["COMPLETED", "COMPLETED"]  # max_trials valid trials, whatever the invalid ones
    assert all(st == "CANCELED" for st in invalid)  # INVALID_HP ends a trial without error or restart
    assert desc["experiment"]["state"] == "COMPLETED"


def test_time_based_asha_stops_losers_early_through_preemption(em: Any, tmp_path: pathlib.Path) -> None:
    s = em.session()
    searcher = {"name": "adaptive_asha", "max_trials": 4, "time_metric": "batches", "max_time": 8, "divisor": 2,
                "mode": "aggressive", "max_concurrent_trials": 1}
    cfg = config(searcher, tmp_path, steps=8, sleep=0.15)
    cfg["reproducibility"] = {"experiment_seed": 5}
    exp_id = create(s, cfg)
    wait_for(lambda: ended(s, exp_id), timeout=120, message="experiment ended")
    desc = experiment(s, exp_id)
    trials = desc["trials"]
    assert desc["experiment"]["state"] == "COMPLETED" and desc["experiment"]["progress"] == 1.0
    assert len(trials) == 4 and all(t["state"] == "COMPLETED" for t in trials)
    batches = sorted(t["total_batches"] for t in trials)
    assert batches[-1] == 8, batches  # the best reach max_time
    assert batches[0] < 8, batches  # losers were stopped early: they ended COMPLETED with fewer batches
    [bracket] = s.get(f"/experiments/{exp_id}/searcher_progress")["brackets"]  # what the UI draws
    assert [r["length"] for r in bracket["rungs"]] == [2, 4, 8] and len(bracket["rungs"][0]["reported"]) == 4
    stopped = [t for t in trials if t["total_batches"] < 8]
    for t in stopped:  # a stopped trial checkpointed at the signal and was not rescheduled
        ckpts = [c["steps_completed"] for c in s.get(f"/trials/{t['id']}")["checkpoints"]]
        assert ckpts and ckpts[-1] == t["total_batches"]


def test_two_ranks_store_one_sharded_checkpoint(em: Any, tmp_path: pathlib.Path) -> None:
    s = em.session()
    cfg = config({"name": "single"}, tmp_path, steps=4, shard=True)
    cfg["resources"] = {"slots_per_trial": 2}
    cfg["entrypoint"] = "python3 -m determined.launch.torch_distributed python3 train.py"  # one rank per slot
    exp_id = create(s, cfg)
    wait_for(lambda: ended(s, exp_id), 60, "experiment ended")
    desc = experiment(s, exp_id)
    [trial] = desc["trials"]
    assert trial["state"] == "COMPLETED", logs(s, trial["id"])
    [ckpt] = [c for c in s.get(f"/trials/{trial['id']}")["checkpoints"] if c["state"] == "COMPLETED"]
    files = sorted(k for k in ckpt["resources"] if not k.endswith("/"))
    assert files == ["metadata.json", "rank0.txt", "rank1.txt", "state.json"]
    stored = tmp_path / "ckpts" / ckpt["uuid"]
    assert (stored / "rank1.txt").read_text() == "rank 1 at step 4"
    # the ranks' metadata, merged
    assert json.loads((stored / "metadata.json").read_text()) == {"steps_completed": 4, "rank0": True, "rank1": True}
    assert ckpt["metadata"] == {"steps_completed": 4, "rank0": True, "rank1": True}
