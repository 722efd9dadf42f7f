"""Checkpoint GC on a real trained experiment, and GC run by a master's background loop.

The digits example runs through `det experiment create` (the foreground embedded master): when the
command returns, GC of its experiment has run. Registry and PATCH then go through a real HTTP server.
"""
import pathlib
import time
from typing import Any, Dict, List, Optional, Set

import pytest

from determined.common.api import Session
from determined.master import embedded, in_process_session
from tests.e2e._helpers import copy_example, det, small_config

from .test_checkpoint_routes import make_experiment, report

METRIC = "validation_accuracy"  # larger is better in the example


def _value(validations: Dict[int, Dict[str, Any]], ckpt: Dict[str, Any]) -> Optional[float]:
    metrics = validations.get(ckpt["steps_completed"])
    return None if metrics is None else float(metrics[METRIC])


def expected_keep(session: Session, trial_ids: List[int], save_trial_best: int = 1, save_trial_latest: int = 1) -> Set[str]:
    """The union rule worked out independently: per trial the best by accuracy (unvalidated last, ties to the
    later checkpoint) and the latest by steps."""
    keep: Set[str] = set()
    for trial_id in trial_ids:
        desc = session.get(f"/trials/{trial_id}")
        validations = {v["steps_completed"]: v["metrics"] for v in desc["validation_metrics"]}
        ckpts = desc["checkpoints"]
        ranked = sorted(ckpts, key=lambda c: (_value(validations, c) is None, -(_value(validations, c) or 0.0),
                                              -c["steps_completed"]))
        keep.update(c["uuid"] for c in ranked[:save_trial_best])
        latest = sorted(ckpts, key=lambda c: -c["steps_completed"])
        keep.update(c["uuid"] for c in latest[:save_trial_latest])
    return keep


@pytest.mark.slow
def test_gc_of_a_trained_experiment(tmp_path: pathlib.Path, det_data_dir: pathlib.Path) -> None:
    cfg = small_config(
        tmp_path,
        searcher={"max_trials": 2, "max_length": {"batches": 24}},
        hyperparameters={"global_batch_size": 16, "learning_rate": 0.01, "hidden_size": 16, "dropout": 0.0},
        min_validation_period={"batches": 8},
        min_checkpoint_period={"batches": 4},
        checkpoint_policy="all",
        scheduling_unit=4,
    )
    proc = det("experiment", "create", str(cfg), str(copy_example(tmp_path)), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # The command has returned and its master is gone: GC of the experiment has already run.
    session = in_process_session(det_data_dir)
    desc = session.get("/experiments/1")
    assert desc["experiment"]["state"] == "COMPLETED"
    trial_ids = [t["id"] for t in desc["trials"]]
    every = session.get("/experiments/1/checkpoints")["checkpoints"]
    steps = sorted(c["steps_completed"] for c in every if c["trial_id"] == trial_ids[0])
    assert steps == [4, 8, 12, 16, 20, 24], "every 4 batches, with and without a validation"
    keep = expected_keep(session, trial_ids)
    assert len(trial_ids) <= len(keep) <= 2 * len(trial_ids) < len(every)
    storage = det_data_dir / "checkpoints"
    for c in every:
        assert c["state"] == ("COMPLETED" if c["uuid"] in keep else "DELETED"), c
        assert (storage / c["uuid"]).is_dir() == (c["uuid"] in keep), c
    for c in every:
        if c["uuid"] in keep:
            for rel, size in c["resources"].items():
                assert (storage / c["uuid"] / rel).stat().st_size == size

    preview = session.get("/experiments/1/preview_gc", {"save_trial_latest": 0})
    best_only = expected_keep(session, trial_ids, save_trial_latest=0)
    assert {c["uuid"] for c in preview["keep"]} == best_only
    assert {c["uuid"] for c in preview["delete"]} == keep - best_only
    session.close()

    # Through a real HTTP server: register one kept checkpoint, then GC with a policy that keeps nothing.
    with embedded.start(det_data_dir) as master:
        http = master.session()
        registered = sorted(keep)[0]
        http.post("/models/digits", {"description": "a kept checkpoint"})
        assert http.post("/models/digits/versions", {"checkpoint_uuid": registered})["version"]["version"] == 1
        answer = http.patch("/experiments/1", {"checkpoint_storage": {
            "save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}})
        assert sorted(answer["deleted"]) == sorted(keep - {registered})
        assert answer["experiment"]["config"]["checkpoint_storage"]["save_trial_best"] == 0
        left = http.get("/experiments/1/checkpoints", {"states": "COMPLETED"})["checkpoints"]
        assert [c["uuid"] for c in left] == [registered]
        assert left[0]["model_versions"] == [{"model_name": "digits", "version": 1}]
        assert sorted(p.name for p in storage.iterdir()) == [registered]
        preview = http.get("/experiments/1/preview_gc")
        assert preview["delete"] == [] and [c["uuid"] for c in preview["keep"]] == [registered]


def test_the_background_loop_collects_an_experiment_once_it_ends(det_data_dir: pathlib.Path) -> None:
    """A master's loop runs GC for an experiment that ended (here: canceled) without any request asking."""
    data_dir = det_data_dir
    session = in_process_session(data_dir)
    desc = make_experiment(session, trials=1)
    trial_id = desc["trials"][0]["id"]
    old = report(session, data_dir, trial_id, 10, loss=0.9)
    best = report(session, data_dir, trial_id, 20, loss=0.1)
    latest = report(session, data_dir, trial_id, 30, loss=0.5)
    session.close()
    with embedded.start(data_dir) as master:
        http = master.session()
        assert http.get(f"/checkpoints/{old}")["checkpoint"]["state"] == "COMPLETED", "GC waits for the end"
        http.post("/experiments/1/cancel")
        deadline = time.monotonic() + 30
        while http.get(f"/checkpoints/{old}")["checkpoint"]["state"] != "DELETED":
            assert time.monotonic() < deadline, "the master's loop did not collect the ended experiment"
            time.sleep(0.1)
        states = {c["uuid"]: c["state"] for c in http.get("/experiments/1/checkpoints")["checkpoints"]}
        assert states == {old: "DELETED", best: "COMPLETED", latest: "COMPLETED"}
        assert not (data_dir / "checkpoints" / old).exists() and (data_dir / "checkpoints" / best).is_dir()
