"""ExperimentReference, TrialReference and Checkpoint against a really trained experiment."""
import json
import os
import pathlib
from typing import Any, Dict, List

import pytest
import torch

from determined import errors
from determined.experimental import Checkpoint, Determined
from tests.client import _trained
from tests.client.conftest import Env

pytestmark = pytest.mark.slow


def _raw_checkpoints(d: Determined, experiment_id: int) -> List[Dict[str, Any]]:
    return d._session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"]


def _expected_top(checkpoints: List[Dict[str, Any]], metric: str, smaller: bool) -> List[str]:
    """Uuids of each trial's best validated checkpoint, trials ordered best first, in the documented order of
    "best" (docs/sdk.md): the metric in its direction, then more batches, then the lower trial id, then the uuid.
    Ties are common here (a small validation set), so the test must not depend on the order rows come in."""
    best: Dict[int, Any] = {}
    for c in checkpoints:
        value = c["validation_metrics"].get(metric)
        if c["state"] != "COMPLETED" or value is None:
            continue
        key = (value if smaller else -value, -c["steps_completed"], c["trial_id"], c["uuid"])
        if c["trial_id"] not in best or key < best[c["trial_id"]]:
            best[c["trial_id"]] = key
    return [key[3] for key in sorted(best.values())]


def test_the_session_goes_where_it_should(env: Env) -> None:
    d = Determined()
    # no master running: reads go to the data dir's SQLite database, writes to its app opened in-process (on
    # PostgreSQL, reads go to the app too)
    on_postgres = not os.environ.get("DET_DB_URL", "sqlite:///").startswith("sqlite:///")
    expected = "http://in-process" if on_postgres else f"local:{env.trained.data_dir.resolve()}"
    assert d._session.master == (env.url or expected)
    if env.url:
        explicit = Determined(master=env.url)
        assert explicit._session.master == env.url
        assert explicit.get_experiment(env.trained.experiment_id).id == env.trained.experiment_id


def test_top_n_checkpoints_is_one_per_trial_best_first(env: Env) -> None:
    d = Determined()
    exp = d.get_experiment(env.trained.experiment_id)
    raw = _raw_checkpoints(d, exp.id)
    assert len(raw) == 12 and all(c["state"] == "COMPLETED" for c in raw), "3 trials x 4 checkpoints were kept"

    top = exp.top_n_checkpoints(3)
    assert [c.uuid for c in top] == _expected_top(raw, "validation_accuracy", smaller=False)
    assert len({c.trial_id for c in top}) == 3
    accuracies = [c.validation["metrics"]["validationMetrics"]["validation_accuracy"] for c in top]
    assert accuracies == sorted(accuracies, reverse=True), "smaller_is_better: false in the config"
    assert all(c.batch_number in (20, 40) for c in top), "only validated checkpoints rank"
    assert exp.top_checkpoint().uuid == top[0].uuid
    assert [c.uuid for c in exp.top_n_checkpoints(10)] == [c.uuid for c in top], "at most one per trial"
    assert [c.uuid for c in exp.top_n_checkpoints(2)] == [c.uuid for c in top[:2]]
    # smaller_is_better is ignored without sort_by.
    assert [c.uuid for c in exp.top_n_checkpoints(3, smaller_is_better=True)] == [c.uuid for c in top]

    worst_first = exp.top_n_checkpoints(3, sort_by="validation_accuracy", smaller_is_better=True)
    assert [c.uuid for c in worst_first] == _expected_top(raw, "validation_accuracy", smaller=True)
    assert [c.trial_id for c in worst_first] != [c.trial_id for c in top] or len(top) == 1
    by_loss = exp.top_n_checkpoints(3, sort_by="validation_loss", smaller_is_better=True)
    assert [c.uuid for c in by_loss] == _expected_top(raw, "validation_loss", smaller=True)
    losses = [c.validation_metrics["validation_loss"] for c in by_loss]
    assert losses == sorted(losses)

    first = top[0]
    assert first.experiment_config["searcher"]["metric"] == "validation_accuracy"
    assert first.experiment_id == exp.id and first.framework.startswith("torch-")
    assert first.format == "cloudpickle" and first.hparams["probe_dir"] == str(env.trained.probe_dir)
    assert "state_dict.pth" in first.resources and first.determined_version

    with pytest.raises(ValueError, match="limit"):
        exp.top_n_checkpoints(0)
    with pytest.raises(errors.DeterminedError, match="no_such_metric"):
        exp.top_checkpoint(sort_by="no_such_metric")


def test_select_checkpoint(env: Env) -> None:
    d = Determined()
    raw = _raw_checkpoints(d, env.trained.experiment_id)
    trial_id = raw[0]["trial_id"]
    trial = d.get_trial(trial_id)
    mine = [c for c in raw if c["trial_id"] == trial_id]

    latest = trial.select_checkpoint(latest=True)
    assert latest.batch_number == _trained.LENGTH and latest.trial_id == trial_id
    best = trial.select_checkpoint(best=True)
    validated = [c for c in mine if c["validation_metrics"]]
    # Equal accuracies (common on this small validation set): the later checkpoint is the best.
    assert best.uuid == max(validated, key=lambda c: (c["validation_metrics"]["validation_accuracy"],
                                                      c["steps_completed"]))["uuid"]
    assert trial.top_checkpoint().uuid == best.uuid
    lowest_loss = min(validated, key=lambda c: c["validation_metrics"]["validation_loss"])["uuid"]
    assert trial.select_checkpoint(best=True, sort_by="validation_loss", smaller_is_better=True).uuid == lowest_loss
    highest_loss = max(validated, key=lambda c: c["validation_metrics"]["validation_loss"])["uuid"]
    assert trial.top_checkpoint(sort_by="validation_loss", smaller_is_better=False).uuid == highest_loss
    unvalidated = next(c for c in mine if c["steps_completed"] == 10)
    by_uuid = trial.select_checkpoint(uuid=unvalidated["uuid"])
    assert by_uuid.batch_number == 10 and by_uuid.validation_metrics == {}

    for kwargs in ({}, {"latest": True, "best": True}, {"best": True, "uuid": unvalidated["uuid"]},
                   {"latest": True, "uuid": unvalidated["uuid"]}):
        with pytest.raises(ValueError, match="exactly one of latest"):
            trial.select_checkpoint(**kwargs)
    with pytest.raises(ValueError, match="only be used with best"):
        trial.select_checkpoint(latest=True, sort_by="validation_loss")
    with pytest.raises(ValueError, match="only be used with best"):
        trial.select_checkpoint(uuid=unvalidated["uuid"], smaller_is_better=True)
    other = next(c for c in raw if c["trial_id"] != trial_id)
    with pytest.raises(errors.DeterminedError, match=f"belongs to trial {other['trial_id']}"):
        trial.select_checkpoint(uuid=other["uuid"])


def _predict(trial: Any) -> torch.Tensor:
    model = trial.model
    model.eval()
    with torch.no_grad():
        return model(_trained.probe_inputs())


def test_download_and_load_predict_what_the_trial_predicted(env: Env) -> None:
    d = Determined()
    exp = d.get_experiment(env.trained.experiment_id)
    best = exp.top_checkpoint()
    ckpt = d.get_checkpoint(best.uuid)
    assert (ckpt.trial_id, ckpt.batch_number) == (best.trial_id, best.batch_number)

    path = pathlib.Path(ckpt.download())
    assert path == pathlib.Path("checkpoints", ckpt.uuid)
    stored = env.trained.data_dir / "checkpoints" / ckpt.uuid
    for rel, size in ckpt.resources.items():
        if not rel.endswith("/") and rel != "metadata.json":  # the download writes its own (with the metadata)
            assert (path / rel).stat().st_size == size == (stored / rel).stat().st_size
    meta = json.loads((path / "metadata.json").read_text())
    assert set(meta) == {"determined_version", "framework", "format", "experiment_id", "trial_id", "hparams",
                         "experiment_config", "metadata"}
    assert (meta["experiment_id"], meta["trial_id"], meta["framework"]) == (exp.id, ckpt.trial_id, ckpt.framework)
    assert meta["hparams"] == ckpt.hparams and meta["experiment_config"]["entrypoint"] == "ckpt_probe:ProbedDigitsTrial"
    assert (path / "code" / "ckpt_probe.py").read_text() == (env.trained.model_dir / "ckpt_probe.py").read_text()

    calls: List[str] = []

    def map_location(storage: Any, location: str) -> Any:
        calls.append(location)
        return storage

    trial = ckpt.load(map_location=map_location)
    assert calls, "map_location reached torch.load"
    assert type(trial).__name__ == "ProbedDigitsTrial"
    expected = env.trained.predictions(ckpt.trial_id, ckpt.batch_number)
    torch.testing.assert_close(_predict(trial), expected, rtol=1e-6, atol=1e-6)
    earlier = env.trained.predictions(ckpt.trial_id, 10)
    assert not torch.allclose(_predict(trial), earlier, atol=1e-4), "the weights are those of this batch"

    # A checkpoint without a validation, into an explicit path, loaded through the static method.
    trial_ref = d.get_trial(ckpt.trial_id)
    raw = trial_ref._session.get(f"/trials/{ckpt.trial_id}")["checkpoints"]
    at_30 = trial_ref.select_checkpoint(uuid=next(c["uuid"] for c in raw if c["steps_completed"] == 30))
    target = pathlib.Path("elsewhere", "ckpt30")
    assert at_30.download(str(target)) == str(target)
    loaded = Checkpoint.load_from_path(str(target), map_location="cpu")
    torch.testing.assert_close(_predict(loaded), env.trained.predictions(ckpt.trial_id, 30), rtol=1e-6, atol=1e-6)
    # load() of a directory that already holds the download does not download again.
    (target / "state_dict.pth").rename(target / "moved.pth")
    with pytest.raises(errors.DeterminedError, match="no PyTorch checkpoint"):
        at_30.load(str(target))


def test_load_from_path_errors(env: Env, tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.DeterminedError, match="does not exist"):
        Checkpoint.load_from_path(str(tmp_path / "missing"))
    tf_dir = tmp_path / "tf"
    tf_dir.mkdir()
    (tf_dir / "metadata.json").write_text(json.dumps({"framework": "tensorflow-2.15.0", "format": "saved_model"}))
    with pytest.raises(errors.DeterminedError, match="holds no SavedModel"):
        Checkpoint.load_from_path(str(tf_dir))
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "metadata.json").write_text(json.dumps({"framework": "jax-0.4", "format": "orbax"}))
    with pytest.raises(errors.DeterminedError, match="'jax-0.4': no loader knows"):
        Checkpoint.load_from_path(str(unknown))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(errors.DeterminedError, match="metadata.json"):
        Checkpoint.load_from_path(str(empty))


def test_checkpoint_metadata(env: Env) -> None:
    d = Determined()
    uuid = _raw_checkpoints(d, env.trained.experiment_id)[1]["uuid"]
    ckpt = d.get_checkpoint(uuid)
    before = dict(ckpt.metadata)
    key = f"{env.mode}-note"
    ckpt.add_metadata({key: {"x": [1, 2]}, "shared": env.mode})
    assert ckpt.metadata == {**before, key: {"x": [1, 2]}, "shared": env.mode}
    assert d.get_checkpoint(uuid).metadata == ckpt.metadata, "stored by the master"
    ckpt.add_metadata({key: 3})
    assert d.get_checkpoint(uuid).metadata[key] == 3
    with pytest.raises(ValueError, match="JSON"):
        ckpt.add_metadata({"bad": {1, 2}})
    with pytest.raises(ValueError, match="dict"):
        ckpt.add_metadata(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="list of strings"):
        ckpt.remove_metadata("shared")  # type: ignore[arg-type]
    assert "bad" not in d.get_checkpoint(uuid).metadata, "nothing stored"
    ckpt.remove_metadata([key, "shared", "never-there"])
    assert ckpt.metadata == before and d.get_checkpoint(uuid).metadata == before


def test_unknown_ids_are_clear_errors(env: Env) -> None:
    d = Determined()
    with pytest.raises(errors.NotFoundError, match="999"):
        d.get_experiment(999)
    with pytest.raises(errors.NotFoundError, match="999"):
        d.get_trial(999)
    with pytest.raises(errors.NotFoundError, match="no-such-uuid"):
        d.get_checkpoint("no-such-uuid")
    with pytest.raises(ValueError, match="experiment_id"):
        d.get_experiment("1")  # type: ignore[arg-type]
