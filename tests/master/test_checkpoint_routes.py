"""Checkpoint routes in-process: lookup, per-trial and per-experiment lists, metadata, preview_gc and PATCH.

Rows are made through the real trial protocol routes; checkpoint files are real directories in the
experiment's shared_fs storage.
"""
import pathlib
import uuid as uuidlib
from typing import Any, Dict, List, Optional

import pytest

from determined import errors
from determined.common.api import Session
from determined.master import in_process_session

from ._helpers import config, model_def


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "data"


@pytest.fixture
def session(data_dir: pathlib.Path) -> Session:
    return in_process_session(data_dir)


def make_experiment(session: Session, trials: int = 2, **extra: Any) -> Dict[str, Any]:
    """An experiment with `trials` trials (random search, searcher metric `loss`, smaller is better)."""
    exp = session.post("/experiments", {"config": config(max_trials=trials, **extra), "model_definition": model_def()})
    return session.get(f"/experiments/{exp['experiment']['id']}")


def report(session: Session, data_dir: pathlib.Path, trial_id: int, steps: int, loss: Optional[float] = None,
           uuid: Optional[str] = None, files: bool = True) -> str:
    """A validation (when `loss` is given) and a checkpoint at `steps`, with a file in storage; the uuid."""
    uuid = uuid or str(uuidlib.uuid4())
    if loss is not None:
        session.post(f"/trials/{trial_id}/validation_metrics", {"steps_completed": steps, "metrics": {"loss": loss}})
    if files:
        path = data_dir / "checkpoints" / uuid
        path.mkdir(parents=True)
        (path / "state.bin").write_bytes(b"x" * steps)
    session.post(f"/trials/{trial_id}/checkpoints", {"uuid": uuid, "steps_completed": steps,
                                                     "resources": {"state.bin": steps}, "framework": "test"})
    return uuid


def states_of(session: Session, experiment_id: int) -> Dict[str, str]:
    return {c["uuid"]: c["state"] for c in session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"]}


def refused(status: int, call: Any, *args: Any) -> errors.APIError:
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == status, info.value
    return info.value


def test_lookup_and_lists(session: Session, data_dir: pathlib.Path) -> None:
    desc = make_experiment(session)
    exp_id = desc["experiment"]["id"]
    t1, t2 = (t["id"] for t in desc["trials"])
    late = report(session, data_dir, t1, 20, loss=0.5)
    early = report(session, data_dir, t1, 10, loss=0.7)
    other = report(session, data_dir, t2, 5)

    ckpt = session.get(f"/checkpoints/{late}")["checkpoint"]
    assert ckpt["uuid"] == late and ckpt["trial_id"] == t1 and ckpt["experiment_id"] == exp_id
    assert ckpt["state"] == "COMPLETED" and ckpt["steps_completed"] == 20 and ckpt["batch_number"] == 20
    assert ckpt["validation_metrics"] == {"loss": 0.5} and ckpt["model_versions"] == []
    assert ckpt["storage"]["type"] == "shared_fs" and ckpt["resources"] == {"state.bin": 20}
    assert "nope" in str(refused(404, session.get, "/checkpoints/nope"))

    by_trial = session.get(f"/trials/{t1}/checkpoints")["checkpoints"]
    assert [c["uuid"] for c in by_trial] == [early, late], "ordered by steps_completed"
    assert session.get(f"/trials/{t1}/checkpoints", {"states": "COMPLETED"})["checkpoints"] == by_trial
    assert session.get(f"/trials/{t1}/checkpoints", {"states": ["DELETED", "ERROR"]})["checkpoints"] == []
    by_exp = session.get(f"/experiments/{exp_id}/checkpoints", {"states": "COMPLETED"})["checkpoints"]
    assert [c["uuid"] for c in by_exp] == [late, early, other], "ordered by id"

    problem = refused(400, session.get, f"/trials/{t1}/checkpoints", {"states": "FINISHED"})
    assert "FINISHED" in str(problem) and "COMPLETED" in str(problem)
    refused(400, session.get, f"/experiments/{exp_id}/checkpoints", {"states": "bogus"})
    assert "trial 999" in str(refused(404, session.get, "/trials/999/checkpoints"))
    assert "experiment 999" in str(refused(404, session.get, "/experiments/999/checkpoints"))


def test_metadata_merge_and_remove(session: Session, data_dir: pathlib.Path) -> None:
    desc = make_experiment(session, trials=1)
    uuid = report(session, data_dir, desc["trials"][0]["id"], 10, loss=1.0)
    path = f"/checkpoints/{uuid}/metadata"

    got = session.post(path, {"metadata": {"a": 1, "nested": {"x": 1}}})["checkpoint"]["metadata"]
    assert got == {"a": 1, "nested": {"x": 1}}
    got = session.post(path, {"metadata": {"nested": {"y": 2}, "b": "two"}})["checkpoint"]["metadata"]
    assert got == {"a": 1, "nested": {"y": 2}, "b": "two"}, "merged, top-level keys replaced"

    got = session.request("DELETE", path, params={"keys": ["a", "missing"]})["checkpoint"]["metadata"]
    assert got == {"nested": {"y": 2}, "b": "two"}
    assert session.request("DELETE", path)["checkpoint"]["metadata"] == got, "no keys: nothing removed"

    for bad in ([1, 2], "text", 3, None):
        problem = refused(400, session.post, path, {"metadata": bad})
        assert "metadata" in str(problem) and "JSON object" in str(problem)
    refused(400, session.post, path, {})
    refused(400, session.post, path, {"metadata": {}, "extra": 1})
    raw = session._client.post("/api/v1" + path, content=b'{"metadata": {"x": [NaN]}}',
                               headers={"content-type": "application/json"})
    assert raw.status_code == 400 and "metadata.x[0]" in raw.text
    assert session.get(f"/checkpoints/{uuid}")["checkpoint"]["metadata"] == got, "nothing stored by refused requests"
    refused(404, session.post, "/checkpoints/nope/metadata", {"metadata": {"a": 1}})
    refused(404, session.request, "DELETE", "/checkpoints/nope/metadata")


def _uuids(checkpoints: List[Dict[str, Any]]) -> List[str]:
    return [c["uuid"] for c in checkpoints]


def test_preview_gc_and_patch_on_an_ended_experiment(session: Session, data_dir: pathlib.Path) -> None:
    desc = make_experiment(session)
    exp_id = desc["experiment"]["id"]
    t1, t2 = (t["id"] for t in desc["trials"])
    a10 = report(session, data_dir, t1, 10, loss=0.3)   # best of the experiment
    a20 = report(session, data_dir, t1, 20, loss=0.6)
    a25 = report(session, data_dir, t1, 25)            # no validation: ranks last, but is trial 1's latest
    b10 = report(session, data_dir, t2, 10, loss=0.5)   # best of trial 2
    b20 = report(session, data_dir, t2, 20, loss=0.9)   # trial 2's latest
    bad = report(session, data_dir, t2, 5, loss=0.95, files=False)
    # Planted where its files would be: a link to the data dir; GC must never follow it.
    (data_dir / "checkpoints" / bad).symlink_to(data_dir, target_is_directory=True)
    (data_dir / "master-file").write_text("the master's own")  # the data dir holds no database on PostgreSQL

    preview = session.get(f"/experiments/{exp_id}/preview_gc")
    assert _uuids(preview["keep"]) == [a10, a25, b10, b20]
    assert _uuids(preview["delete"]) == [a20, bad]
    preview = session.get(f"/experiments/{exp_id}/preview_gc", {"save_trial_latest": 0})
    assert _uuids(preview["keep"]) == [a10, b10]
    preview = session.get(f"/experiments/{exp_id}/preview_gc",
                          {"save_trial_latest": 0, "save_trial_best": 0, "save_experiment_best": 2})
    assert _uuids(preview["keep"]) == [a10, b10]
    preview = session.get(f"/experiments/{exp_id}/preview_gc",
                          {"save_trial_latest": 0, "save_trial_best": 2, "save_experiment_best": 0})
    assert _uuids(preview["keep"]) == [a10, a20, b10, b20]
    for params in ({"save_trial_best": -1}, {"save_trial_best": "two"}):
        assert "save_trial_best" in str(refused(400, session.get, f"/experiments/{exp_id}/preview_gc", params))
    refused(404, session.get, "/experiments/999/preview_gc")

    config_before = session.get(f"/experiments/{exp_id}")["experiment"]["config"]
    for body in ({"checkpoint_storage": {"save_trial_best": -1}}, {"checkpoint_storage": {"keep_all": 1}},
                 {"checkpoint_storage": [1]}, {"checkpoint_storage": {"save_trial_best": 1}, "unknown_field": "x"},
                 {"checkpoint_storage": {"save_trial_latest": 0, "save_trial_best": True}}):
        refused(400, session.patch, f"/experiments/{exp_id}", body)
    assert session.get(f"/experiments/{exp_id}")["experiment"]["config"] == config_before, "nothing stored"
    refused(404, session.patch, "/experiments/999", {"checkpoint_storage": {"save_trial_best": 0}})

    # An experiment still running only stores the policy; GC waits for its end.
    answer = session.patch(f"/experiments/{exp_id}", {"checkpoint_storage": {"save_trial_latest": 0}})
    assert answer["deleted"] == [] and answer["experiment"]["config"]["checkpoint_storage"]["save_trial_latest"] == 0
    assert set(states_of(session, exp_id).values()) == {"COMPLETED"}

    # Canceled in-process (no background loop): collected at once under the stored policy.
    assert session.post(f"/experiments/{exp_id}/cancel")["experiment"]["state"] == "CANCELED"
    assert states_of(session, exp_id) == {a10: "COMPLETED", b10: "COMPLETED", a20: "DELETED", a25: "DELETED",
                                          b20: "DELETED", bad: "COMPLETED"}, "a failed deletion stays COMPLETED"
    storage = data_dir / "checkpoints"
    assert (storage / a10 / "state.bin").is_file() and (storage / b10 / "state.bin").is_file()
    assert not any((storage / u).exists() for u in (a20, a25, b20))
    assert not [p for p in storage.iterdir() if p.name.startswith(".")], "no half-deleted leftovers"
    assert (storage / bad).is_symlink() and (data_dir / "master-file").read_text() == "the master's own", \
        "the link and its target stay"

    # A PATCH of an ended experiment stores the policy and collects at once.
    answer = session.patch(f"/experiments/{exp_id}", {"checkpoint_storage": {"save_trial_best": 0,
                                                                             "save_experiment_best": 1}})
    assert answer["experiment"]["state"] == "CANCELED" and answer["deleted"] == [b10]
    assert answer["experiment"]["config"]["checkpoint_storage"] == {
        **config_before["checkpoint_storage"], "save_trial_latest": 0, "save_trial_best": 0, "save_experiment_best": 1}
    assert states_of(session, exp_id)[b10] == "DELETED" and not (storage / b10).exists()
    assert states_of(session, exp_id)[a10] == "COMPLETED" and (storage / a10).is_dir()
    assert session.patch(f"/experiments/{exp_id}", {})["deleted"] == [], "nothing more to collect"


def test_gc_keeps_a_checkpoint_that_an_unfinished_warm_start_still_needs(session: Session, data_dir: pathlib.Path) -> None:
    source = make_experiment(session, trials=1)
    source_id, [trial] = source["experiment"]["id"], source["trials"]
    early = report(session, data_dir, trial["id"], 10, loss=0.9)
    report(session, data_dir, trial["id"], 20, loss=0.1)

    warm = make_experiment(session, trials=1, searcher={"source_checkpoint_uuid": early})
    [warm_trial] = warm["trials"]
    assert session.get(f"/trials/{warm_trial['id']}/context")["latest_checkpoint"]["uuid"] == early

    # The strictest policy on the source: everything but what the warm-started trial still needs goes.
    strictest = {"save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}
    assert _uuids(session.get(f"/experiments/{source_id}/preview_gc", strictest)["keep"]) == [early]
    session.post(f"/experiments/{source_id}/cancel")
    answer = session.patch(f"/experiments/{source_id}", {"checkpoint_storage": {
        "save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}})
    assert early not in answer["deleted"] and states_of(session, source_id)[early] == "COMPLETED"
    assert (data_dir / "checkpoints" / early / "state.bin").is_file()

    # Once that trial has a checkpoint of its own, a restart no longer needs the source.
    report(session, data_dir, warm_trial["id"], 5, loss=0.5)
    assert session.patch(f"/experiments/{source_id}", {})["deleted"] == [early]
    assert not (data_dir / "checkpoints" / early).exists()
