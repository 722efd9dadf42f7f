"""Trial source infos (Determined 0.26's `report_task_using_*`): a trial links itself to a checkpoint or a model
version with its own token, and the metrics of the linked trials are read through the checkpoint and the version.
In-process, on both databases; plus migration 0012 on a database of the previous version."""
import datetime
import pathlib
from typing import Any, Dict, List, Tuple

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from determined import errors
from determined.common.api import Session
from determined.master.lifecycle import allocations
from determined.master.db import Base, Experiment, Trial, default_db_url, make_engine, upgrade
from tests.auth._helpers import InProcessMaster, create_experiment

from .test_checkpoint_routes import report


def refused(status: int, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call(*args, **kwargs)
    assert info.value.status_code == status, str(info.value)
    return str(info.value)


def start_run(master: InProcessMaster, trial_id: int) -> Session:
    """A session with the token of a new run of the trial (what DET_SESSION_TOKEN holds in its process)."""
    with master.master.write() as s:
        _, token = allocations.start_allocation(s, s.get(Trial, trial_id))
    return master.raw(token)


def end(master: InProcessMaster, experiment_id: int) -> None:
    """The experiment ended (no scheduler runs here): it may be deleted."""
    with master.master.write() as s:
        s.get(Experiment, experiment_id).state = "COMPLETED"


def trials_of(session: Session, experiment_id: int) -> List[int]:
    return [t["id"] for t in session.get(f"/experiments/{experiment_id}")["trials"]]


def linked(answer: Dict[str, Any]) -> List[Tuple[int, str, int, Dict[str, Any]]]:
    return [(m["trial_id"], m["group"], m["steps_completed"], m["metrics"]) for m in answer["metrics"]]


@pytest.fixture
def lab(tmp_path: pathlib.Path) -> Dict[str, Any]:
    """A training experiment with one checkpoint registered as version 1 of model `m`, and an inference
    experiment of two trials, each with its run's session."""
    master = InProcessMaster(tmp_path / "data")
    user = master.session("determined")
    train = create_experiment(user, max_trials=1)["id"]
    (trainer,) = trials_of(user, train)
    uuid = report(user, tmp_path / "data", trainer, 10, loss=0.5)
    user.post(f"/trials/{trainer}/training_metrics", {"steps_completed": 10, "metrics": {"loss": 0.6}})
    user.post("/models/m", {})
    version = user.post("/models/m/versions", {"checkpoint_uuid": uuid})["version"]
    infer = create_experiment(user, max_trials=2)["id"]
    one, two = trials_of(user, infer)
    return {"master": master, "user": user, "train": train, "uuid": uuid, "model_id": version["model_id"],
            "infer": infer, "one": one, "two": two, "run1": start_run(master, one), "run2": start_run(master, two)}


def test_a_trial_links_itself_and_its_metrics_are_read_through_the_version_and_the_checkpoint(
        lab: Dict[str, Any]) -> None:
    user, run1, run2, one, two, uuid = (lab[k] for k in ("user", "run1", "run2", "one", "two", "uuid"))
    answer = run1.post(f"/trials/{one}/source_info", {"model_id": lab["model_id"], "model_version": 1})
    assert answer["trial_source_info"] == {"trial_id": one, "checkpoint_uuid": uuid, "kind": "INFERENCE",
                                           "model_id": lab["model_id"], "model_version": 1}
    run1.post(f"/trials/{one}/source_info", {"model_id": lab["model_id"], "model_version": 1})  # a repeat: no-op
    run2.post(f"/trials/{two}/source_info", {"checkpoint_uuid": uuid})
    run1.post(f"/trials/{one}/metrics", {"group": "inference", "steps_completed": 3, "metrics": {"acc": 0.9}})
    run1.post(f"/trials/{one}/validation_metrics", {"steps_completed": 3, "metrics": {"loss": 0.25}})
    run1.post(f"/trials/{one}/training_metrics", {"steps_completed": 1, "metrics": {"loss": 0.3}})
    run2.post(f"/trials/{two}/validation_metrics", {"steps_completed": 4, "metrics": {"loss": 0.125}})

    by_version = user.get("/models/m/versions/1/metrics")
    assert by_version["trial_ids"] == [one]
    assert linked(by_version) == [(one, "training", 1, {"loss": 0.3}), (one, "validation", 3, {"loss": 0.25}),
                                  (one, "inference", 3, {"acc": 0.9})]
    by_checkpoint = user.get(f"/checkpoints/{uuid}/metrics")
    assert by_checkpoint["trial_ids"] == [one, two], "the version's link counts for its checkpoint too"
    assert linked(by_checkpoint) == linked(by_version) + [(two, "validation", 4, {"loss": 0.125})]
    assert linked(user.get(f"/checkpoints/{uuid}/metrics", {"group": "validation"})) == [
        (one, "validation", 3, {"loss": 0.25}), (two, "validation", 4, {"loss": 0.125})]
    assert linked(user.get("/models/m/versions/1/metrics", {"group": "inference"})) == [
        (one, "inference", 3, {"acc": 0.9})]
    assert user.get(f"/checkpoints/{uuid}/metrics", {"kind": "FINE_TUNING"}) == {"trial_ids": [], "metrics": []}
    # the trainer's own metrics are not the checkpoint's: it did not report using it
    assert lab["run1"].get(f"/checkpoints/{uuid}/metrics")["trial_ids"] == [one, two], "a trial token reads too"


def test_a_trial_cannot_link_another_trial_and_bad_input_is_named(lab: Dict[str, Any]) -> None:
    user, run1, one, two, uuid = (lab[k] for k in ("user", "run1", "one", "two", "uuid"))
    assert f"trial {one}" in refused(403, run1.post, f"/trials/{two}/source_info", {"checkpoint_uuid": uuid})
    assert user.get(f"/checkpoints/{uuid}/metrics")["trial_ids"] == [], "nothing was recorded"
    source = f"/trials/{one}/source_info"
    assert f"checkpoint {'f' * 36} not found" in refused(404, run1.post, source, {"checkpoint_uuid": "f" * 36})
    for body, needle in (({"checkpoint_uuid": 7}, "checkpoint_uuid"), ({"checkpoint_uuid": "x" * 65}, "at most 64"),
                         ({"checkpoint_uuid": ""}, "checkpoint_uuid"), ({}, "required"),
                         ({"checkpoint_uuid": uuid, "trial_id": two}, "unknown field"),
                         ({"checkpoint_uuid": uuid, "kind": "TRAINING"}, "INFERENCE, FINE_TUNING"),
                         ({"model_version": 1}, "together"),
                         ({"model_id": "m", "model_version": 1}, "positive integer"),
                         ({"model_id": lab["model_id"], "model_version": True}, "positive integer"),
                         ({"model_id": lab["model_id"], "model_version": 1, "checkpoint_uuid": "0" * 36},
                          "not the checkpoint of that model version")):
        assert needle in refused(400, run1.post, source, body), body
    assert "version 2 of model 'm' not found" in refused(404, run1.post, source,
                                                          {"model_id": lab["model_id"], "model_version": 2})
    assert "model 999 not found" in refused(404, run1.post, source, {"model_id": 999, "model_version": 1})
    refused(404, user.post, "/trials/99999/source_info", {"checkpoint_uuid": uuid})
    refused(404, user.get, "/checkpoints/nope/metrics")
    refused(404, user.get, "/models/m/versions/2/metrics")
    refused(400, user.get, f"/checkpoints/{uuid}/metrics", {"group": "a.b"})
    refused(400, user.get, f"/checkpoints/{uuid}/metrics", {"kind": "OTHER"})
    assert user.get(f"/checkpoints/{uuid}/metrics")["trial_ids"] == []
    # the experiment's owner may link its trials (as they may report for them)
    user.post(f"/trials/{two}/source_info", {"checkpoint_uuid": uuid, "kind": "FINE_TUNING"})
    assert user.get(f"/checkpoints/{uuid}/metrics", {"kind": "FINE_TUNING"})["trial_ids"] == [two]


def test_deleting_versions_and_experiments_leaves_no_dangling_links(lab: Dict[str, Any]) -> None:
    master, user, run1, run2, one, two, uuid = (lab[k] for k in ("master", "user", "run1", "run2", "one", "two",
                                                                 "uuid"))
    run1.post(f"/trials/{one}/source_info", {"model_id": lab["model_id"], "model_version": 1})
    run2.post(f"/trials/{two}/source_info", {"checkpoint_uuid": uuid})
    run1.post(f"/trials/{one}/validation_metrics", {"steps_completed": 2, "metrics": {"loss": 1.0}})
    user.delete("/models/m/versions/1")
    refused(404, user.get, "/models/m/versions/1/metrics")
    assert user.get(f"/checkpoints/{uuid}/metrics")["trial_ids"] == [one, two], "the checkpoint link stays"
    again = user.post("/models/m/versions", {"checkpoint_uuid": uuid})["version"]
    assert again["version"] == 1 and user.get("/models/m/versions/1/metrics")["trial_ids"] == [], \
        "a new version with the same number does not inherit the old one's links"

    user.delete("/models/m")
    end(master, lab["infer"])
    user.delete(f"/experiments/{lab['infer']}")  # the linking trials go with their links
    assert user.get(f"/checkpoints/{uuid}/metrics") == {"trial_ids": [], "metrics": []}

    # a link to a checkpoint of an experiment that is then deleted goes too
    other = create_experiment(user, max_trials=1)["id"]
    (reader,) = trials_of(user, other)
    start_run(master, reader).post(f"/trials/{reader}/source_info", {"checkpoint_uuid": uuid})
    end(master, lab["train"])
    user.delete(f"/experiments/{lab['train']}")
    refused(404, user.get, f"/checkpoints/{uuid}/metrics")
    assert user.get(f"/trials/{reader}")["trial"]["id"] == reader
    with master.master.read() as s:
        assert s.execute(text("SELECT COUNT(*) FROM trial_source_infos")).scalar() == 0


def test_migration_0012_applies_on_a_0011_database(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine, "0011")
    now = datetime.datetime(2026, 1, 1)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO experiments (id, state, config, model_def, owner, searcher_shutdown, "
                          "searcher_failure, progress, start_time) VALUES (1, 'COMPLETED', '{}', :b, 'determined', "
                          ":f, :f, 1.0, :now)"), {"b": b"", "f": False, "now": now})
        conn.execute(text("INSERT INTO trials (id, experiment_id, request_id, hparams, seed, state, restarts, "
                          "total_batches, runs, preempt_requested, close_requested, start_time) VALUES "
                          "(1, 1, 'r', '{}', 0, 'COMPLETED', 0, 5, 1, :f, :f, :now)"), {"f": False, "now": now})
        conn.execute(text("INSERT INTO checkpoints (uuid, experiment_id, trial_id, state, steps_completed, resources, "
                          "framework, format, metadata, determined_version, start_time, end_time) VALUES "
                          "('u1', 1, 1, 'COMPLETED', 5, '{}', '', '', '{}', '0', :now, :now)"), {"now": now})
    upgrade(engine)
    with engine.begin() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        conn.execute(text("INSERT INTO trial_source_infos (trial_id, checkpoint_uuid, kind, created_at) VALUES "
                          "(1, 'u1', 'INFERENCE', :now)"), {"now": now})
        assert conn.execute(text("SELECT trial_id, checkpoint_uuid, model_version_id FROM trial_source_infos")
                            ).one() == (1, "u1", None)
    engine.dispose()
