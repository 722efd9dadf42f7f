"""The 0.38 SDK (`determined.experimental.client`) and CLI against Core API script experiments that really ran,
with the embedded master and with a server (both databases: the PostgreSQL stage runs this module too).

One data dir per module: an experiment run in the foreground by `det e create --config ... -f` (the override
changes what the script prints and reports), then, per mode, what reads, changes and deletes.
"""
import dataclasses
import os
import pathlib
import runpy
import tarfile
import tempfile
from typing import Iterator, Optional

import pytest

from determined import errors
from determined.experimental import client
from determined.master import embedded
from tests import _postgres
from tests.client._cli import cli_fails, det

pytestmark = pytest.mark.slow

SCRIPT = '''
import determined as det

with det.core.init() as core:
    info = det.get_cluster_info()
    n = info.trial.hparams["n"]
    length = info.trial._config["searcher"]["max_length"]["batches"]
    start = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int((path / "steps").read_text())
    print(f"hello from the trial, n={n}", flush=True)
    print(f"training batches {start + 1} to {length}", flush=True)
    for step in range(start + 1, length + 1):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": n / step})
    core.train.report_validation_metrics(steps_completed=length, metrics={"loss": n / length})
    core.train.report_metrics("extra", steps_completed=length, metrics={"score": n})
    with core.checkpoint.store_path({"steps_completed": length}) as (path, uuid):
        (path / "steps").write_text(str(length))
        (path / "weights.txt").write_text(f"n={n}")
        (path / "optimizer.bin").write_bytes(b"x" * 10)
'''

CONFIG = '''
name: sdk-038
entrypoint: python3 train.py
hyperparameters:
  n: 1
searcher:
  name: single
  metric: loss
  max_length:
    batches: 2
max_restarts: 0
'''

# A 0.38 user's script, run unchanged (DET_MASTER / the data dir come from the environment).
USER_SCRIPT = '''
import os
import tempfile

from determined.experimental import client

client.login()
exp = [e for e in client.list_experiments() if e.name == "sdk-038"][0]
state = exp.wait(interval=0.1)
best = exp.list_checkpoints()[0]
path = best.download(os.path.join(tempfile.mkdtemp(), "best"))
losses = [m.metrics["loss"] for m in client.stream_trials_training_metrics([t.id for t in exp.list_trials()])]
model = client.create_model(os.environ["MODEL_NAME"], description="the best")
version = model.register_version(best.uuid)
RESULT = (state, best.uuid, sorted(os.listdir(path)), losses, version.model_version,
          client.get_model(model.name).get_version().checkpoint.uuid)
'''


@dataclasses.dataclass
class Lab:
    root: pathlib.Path
    data_dir: pathlib.Path
    model_dir: pathlib.Path
    config: pathlib.Path
    experiment_id: int
    create_output: str
    mode: str = ""
    url: Optional[str] = None


def _env(monkeypatch: pytest.MonkeyPatch, data_dir: pathlib.Path, url: Optional[str] = None) -> None:
    monkeypatch.setenv("DET_DATA_DIR", str(data_dir))
    db_url = _postgres.database_url_for_subprocesses(data_dir)
    if db_url:
        monkeypatch.setenv("DET_DB_URL", db_url)
    if url:
        monkeypatch.setenv("DET_MASTER", url)
    monkeypatch.setattr(client, "_default", None)  # client.login() once per "process": once per test here


@pytest.fixture(scope="module")
def lab_root() -> Iterator[Lab]:
    root = pathlib.Path(tempfile.mkdtemp(prefix="det-sdk038-"))
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text(SCRIPT)
    config = root / "cfg.yaml"
    config.write_text(CONFIG)
    data_dir = root / "det-data"
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, data_dir)
        proc = det("experiment", "create", str(config), str(model_dir), "--config", "hyperparameters.n=4", "-f")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("Created experiment"))
    yield Lab(root, data_dir, model_dir, config, int(line.split()[2]), proc.stdout)
    import shutil

    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module", params=["embedded", "server"])
def lab_mode(request: pytest.FixtureRequest, lab_root: Lab) -> Iterator[Lab]:
    if request.param == "embedded":
        yield dataclasses.replace(lab_root, mode="embedded")
        return
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, lab_root.data_dir)
        master = embedded.start(lab_root.data_dir)
    try:
        yield dataclasses.replace(lab_root, mode="server", url=master.url)
    finally:
        master.stop()


@pytest.fixture
def lab(lab_mode: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Lab:
    _env(monkeypatch, lab_mode.data_dir, lab_mode.url)
    monkeypatch.chdir(tmp_path)
    return lab_mode


def test_config_override_and_follow_first_trial_show_what_ran(lab_root: Lab) -> None:
    assert "hello from the trial, n=4" in lab_root.create_output, "-f prints the first trial's output"
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, lab_root.data_dir)
        exp = client.get_experiment(lab_root.experiment_id)
        assert exp.config["hyperparameters"]["n"] == {"type": "const", "val": 4}
        assert exp.list_checkpoints()[0].training.validation_metrics == {"loss": 2.0}, "n=4 ran: loss 4/2"


def test_user_script_of_0_38_runs_unchanged(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_NAME", f"best-{lab.mode}")
    script = lab.root / f"user_{lab.mode}.py"
    script.write_text(USER_SCRIPT)
    state, uuid, files, losses, version, latest = runpy.run_path(str(script))["RESULT"]
    assert state == client.ExperimentState.COMPLETED and state == "COMPLETED"
    assert {"weights.txt", "optimizer.bin", "metadata.json"} <= set(files)
    assert losses == [4.0, 2.0] and version == 1 and latest == uuid


def test_experiment_trial_checkpoint_and_metrics(lab: Lab) -> None:
    d = client.Determined()
    exp = d.get_experiment(lab.experiment_id)
    assert (exp.name, exp.state, exp.archived) == ("sdk-038", client.ExperimentState.COMPLETED, False)
    assert exp.id in [e.id for e in d.list_experiments(states=[client.ExperimentState.COMPLETED], name="sdk")]
    assert d.list_experiments(labels=["no-such-label"]) == []
    assert [e.id for e in d.list_experiments(sort_by=client.ExperimentSortBy.ID, order_by=client.OrderBy.DESC)] == \
        sorted((e.id for e in d.list_experiments()), reverse=True)
    assert exp.wait(interval=0.01) == client.ExperimentState.COMPLETED

    trial = exp.await_first_trial()
    assert [t.id for t in exp.list_trials()] == [trial.id] and trial.state == client.TrialState.COMPLETED
    assert trial.hparams == {"n": 4} and trial.get_experiment().id == exp.id
    same = d.get_trial(trial.id)
    same.reload()
    assert same.experiment_id == exp.id and client.TrialReference is client.Trial

    logs = list(trial.iter_logs())
    assert any("hello from the trial, n=4" in line for line in logs) and all(line.endswith("\n") for line in logs)
    assert list(trial.iter_logs(head=2)) == logs[:2] and list(trial.iter_logs(tail=1)) == logs[-1:]
    assert list(trial.iter_logs(search_text="hello from")) == ["hello from the trial, n=4\n"]
    assert all(line.startswith("[master]") for line in trial.iter_logs(sources=["master"]))
    assert list(trial.logs()) == logs

    training = list(d.stream_trials_training_metrics([trial.id]))
    assert [(m.steps_completed, m.metrics) for m in training] == [(1, {"loss": 4.0}), (2, {"loss": 2.0})]
    assert isinstance(training[0], client.TrainingMetrics) and training[1].total_batches == 2
    validation = list(client.stream_trials_validation_metrics([trial.id]))
    assert [(m.group, m.metrics) for m in validation] == [("validation", {"loss": 2.0})]
    assert [m.metrics for m in trial.stream_metrics("extra")] == [{"score": 4}]
    assert [m.metrics for m in client.iter_trials_metrics([trial.id], "extra")] == [{"score": 4}]
    assert list(trial.stream_training_metrics()) == training and list(trial.stream_validation_metrics()) == validation
    with pytest.raises(client.UsageError, match="trial_ids"):
        list(client.stream_trials_metrics("1", "training"))

    (ckpt,) = exp.list_checkpoints()
    assert trial.list_checkpoints(client.CheckpointSortBy.BATCH_NUMBER, client.OrderBy.ASC)[0].uuid == ckpt.uuid
    assert exp.list_checkpoints(sort_by="loss", order_by=client.OrderBy.ASC, max_results=1)[0].uuid == ckpt.uuid
    assert exp.top_checkpoint().uuid == ckpt.uuid == trial.top_checkpoint().uuid
    with pytest.raises(client.UsageError, match="together"):
        exp.list_checkpoints(sort_by="loss")
    assert ckpt.state == client.CheckpointState.COMPLETED and ckpt.training.trial_id == trial.id
    # get_metrics: the metrics of trials that reported using the checkpoint (none here), not its own trial's
    assert list(ckpt.get_metrics("validation")) == [] and list(ckpt.get_metrics()) == []
    direct = ckpt.download("direct", mode=client.DownloadMode.DIRECT)
    through = ckpt.download("master", mode=client.DownloadMode.MASTER)
    for path in (direct, through):
        assert (pathlib.Path(path) / "weights.txt").read_text() == "n=4"
    ckpt.write_metadata_file("meta.json")
    assert '"trial_id": %d' % trial.id in pathlib.Path("meta.json").read_text()
    same_ckpt = d.get_checkpoint(ckpt.uuid)
    same_ckpt.reload()
    assert same_ckpt.resources == ckpt.resources

    exp.archive()
    assert exp.archived and d.get_experiment(exp.id).archived
    exp.unarchive()
    assert not exp.archived
    exp.cancel()  # an ended experiment stays as it ended
    assert exp.state == client.ExperimentState.COMPLETED

    archive = exp.download_code("code")
    with tarfile.open(archive) as tar:
        assert "train.py" in [pathlib.Path(n).name for n in tar.getnames()]

    with pytest.raises(errors.NotFoundError):
        d.get_experiment(99999)
    with pytest.raises(client.UsageError, match="positive integer"):
        d.get_trial(0)


def test_registry_of_0_38_and_the_0_13_face(lab: Lab) -> None:
    from determined.experimental import Determined as Determined013

    d = client.Determined()
    ckpt = d.get_experiment(lab.experiment_id).list_checkpoints()[0]
    name = f"registry-{lab.mode}"
    model = d.create_model(name, description="first", labels=["vision", "small"])
    before = len(d.list_models())
    with pytest.raises(errors.APIError, match="already exists"):
        d.create_model(name)
    assert len(d.list_models()) == before, "a duplicate name stores nothing"
    assert model.get_version() is None and model.labels == ["vision", "small"]
    version = model.register_version(ckpt.uuid)
    assert isinstance(version, client.ModelVersion) and (version.model_name, version.model_version) == (name, 1)
    version.set_name("the best")
    version.set_notes("from the sdk test")
    latest = d.get_model(name).get_version(-1)
    assert (latest.name, latest.notes, latest.checkpoint.uuid) == ("the best", "from the sdk test", ckpt.uuid)
    assert list(latest.get_metrics("validation")) == [] and list(latest.iter_metrics()) == []  # no trial used it
    assert [v.model_version for v in model.list_versions()] == [1]
    assert "vision" in client.get_model_labels() and d.get_model_by_id(model.model_id).name == name
    assert [m.name for m in d.list_models(name=name)] == [name]

    old_face = Determined013().get_model(name)
    assert old_face.get_version(0).uuid == ckpt.uuid and old_face.get_version(0).model_version == 1
    with pytest.raises(ValueError, match="version"):
        old_face.get_version(-1)

    model.set_description("second")
    model.set_labels(["tiny"])
    model.archive()
    model.reload()
    assert (model.description, model.archived, model.labels) == ("second", True, ["tiny"])
    model.unarchive()
    assert not model.archived and name in [m.name for m in d.get_models(name=name)]
    latest.delete()
    assert model.get_version() is None
    model.delete()
    with pytest.raises(errors.NotFoundError):
        d.get_model(name)


def test_users(lab: Lab) -> None:
    admin = client.Determined(user="admin")
    name = f"sdk-user-{lab.mode}"
    user = admin.create_user(name, password="pw-1")
    assert (user.username, user.admin, user.active) == (name, False, True)
    assert admin.get_user_by_name(name).user_id == user.user_id == admin.get_user_by_id(user.user_id).user_id
    assert name in [u.username for u in admin.list_users(active=True)]
    assert admin.whoami().username == "admin" == admin.get_session_username()
    with pytest.raises(errors.APIError, match="already exists"):
        admin.create_user(name, password="pw-2")
    user.deactivate()
    assert name in [u.username for u in admin.list_users(active=False)] and not admin.get_user_by_name(name).active
    user.activate()
    user.reload()
    assert user.active
    client.login(user=name, password="pw-1")
    assert client.whoami().username == name
    theirs = client.get_experiment(lab.experiment_id)  # owned by `determined`: another user may read, not change
    for change in (theirs.delete, lambda: theirs.set_notes("mine now"), lambda: theirs.add_label("mine")):
        with pytest.raises(errors.APIError, match="owned by"):
            change()
    theirs.reload()
    assert theirs.state == "COMPLETED" and theirs.notes != "mine now" and "mine" not in theirs.labels
    with pytest.raises(ValueError, match="once"):
        client.login()
    client.logout()


def test_create_change_and_delete(lab: Lab) -> None:
    """create_experiment (embedded: this process becomes the master; server: over HTTP) with a template, the
    setters, removing files, deleting a checkpoint and the experiment; refusals store nothing."""
    d = client.Determined()
    template = f"tpl-{lab.mode}"
    assert det("template", "create", template, str(_write(lab.root / f"{template}.yaml",
                                                             "labels: [from-template]\nhyperparameters:\n  n: 9\n  k: 2\n"))).returncode == 0
    extra = _write(lab.root / f"extra-{lab.mode}.txt", "included")
    try:
        exp = d.create_experiment(str(lab.config), str(lab.model_dir), includes=[str(extra)], template=template)
        assert exp.wait(interval=0.2) == client.ExperimentState.COMPLETED
    finally:
        d.close()
    with tarfile.open(exp.download_code()) as tar:
        assert {"train.py", extra.name} <= {pathlib.Path(n).name for n in tar.getnames()}
    assert exp.config["hyperparameters"]["k"] == {"type": "const", "val": 2}, "merged under the template"
    assert exp.config["hyperparameters"]["n"] == {"type": "const", "val": 1}, "the config's value wins"
    assert exp.labels == ["from-template"]
    if lab.mode == "server":  # `det e continue`: the trial trains on from its checkpoint to the new max_length
        det("e", "continue", str(exp.id), "--config", "searcher.max_length.batches=3", check=True)
        exp.reload()
        assert exp.state == "COMPLETED" and exp.config["searcher"]["max_length"] == {"batches": 3}
        trial = exp.list_trials()[0]
        assert [m.steps_completed for m in trial.iter_metrics("training")] == [1, 2, 3]
        assert any("training batches 3 to 3" in line for line in trial.iter_logs())
    cli_fails(det("e", "continue", str(exp.id)), "nothing to continue", "max_length")

    exp.set_name("renamed")
    exp.set_description("what it is")
    exp.set_notes("long notes")
    exp.add_label("x")
    exp.remove_label("from-template")
    exp.reload()
    assert (exp.name, exp.description, exp.notes, exp.labels) == ("renamed", "what it is", "long notes", ["x"])
    with pytest.raises(errors.APIError, match="labels"):
        exp.set_labels(["ok", " spaced "])
    exp.reload()
    assert exp.labels == ["x"], "a refused update changes nothing"

    ckpt = exp.top_checkpoint()
    model = d.create_model(f"holder-{lab.mode}")
    model.register_version(ckpt.uuid)
    for refused in (exp.delete, ckpt.delete, lambda: ckpt.remove_files(["*.bin"])):
        with pytest.raises(errors.APIError, match="model registry"):
            refused()
    assert d.get_checkpoint(ckpt.uuid).state == "COMPLETED"
    model.delete()
    ckpt.remove_files(["*.bin"])
    assert ckpt.state == client.CheckpointState.PARTIALLY_DELETED and "optimizer.bin" not in ckpt.resources
    assert sorted(os.listdir(ckpt.download("partial"))) == ["code", "metadata.json", "steps", "weights.txt"]
    ckpt.delete()
    assert d.get_checkpoint(ckpt.uuid).state == "DELETED"
    exp.delete()
    with pytest.raises(errors.NotFoundError):
        d.get_experiment(exp.id)
    with pytest.raises(errors.NotFoundError):
        d.get_trial(ckpt.trial_id)


def _write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text)
    return path


def test_cli_of_0_38(lab: Lab) -> None:
    exp_id = lab.experiment_id
    trial_id = client.Determined().get_experiment(exp_id).list_trials()[0].id
    out = det("e", "logs", str(exp_id), check=True).stdout
    assert "hello from the trial, n=4" in out
    assert det("t", "logs", str(trial_id), "--tail", "1", check=True).stdout.count("\n") == 1
    lines = det("t", "logs", str(trial_id), "--source", "master", "--json", check=True).stdout.splitlines()
    assert lines and all('"source": "master"' in x for x in lines)
    assert "hello" not in det("t", "logs", str(trial_id), "--level", "WARNING", check=True).stdout

    label = f"cli-{lab.mode}"
    det("e", "label", "add", str(exp_id), label, check=True)
    assert label in client.get_experiment(exp_id).labels
    det("e", "label", "remove", str(exp_id), label, check=True)
    assert label not in client.get_experiment(exp_id).labels
    det("e", "set", "description", str(exp_id), f"described in {lab.mode}", check=True)
    det("e", "set", "priority", str(exp_id), "7", check=True)
    det("e", "set", "max-slots", str(exp_id), "2", check=True)
    det("e", "set", "weight", str(exp_id), "0.5", check=True)
    exp = client.get_experiment(exp_id)
    assert exp.description == f"described in {lab.mode}"
    assert {k: exp.config["resources"][k] for k in ("priority", "max_slots", "weight")} == \
        {"priority": 7, "max_slots": 2, "weight": 0.5}
    cli_fails(det("e", "set", "priority", str(exp_id), "100"), "priority", "1 to 99")
    assert client.get_experiment(exp_id).config["resources"]["priority"] == 7

    assert client.get_experiment(exp_id).list_checkpoints()[0].uuid in det("checkpoint", "list", str(exp_id)).stdout
    cli_fails(det("e", "create", str(lab.config), str(lab.model_dir), "--config", "name.first=x"),
              "name is 'sdk-038', not a mapping")
    cli_fails(det("e", "create", str(lab.config), str(lab.model_dir), "--config", "searcher"), "KEY=VALUE")
    cli_fails(det("e", "create", str(lab.config), str(lab.model_dir), "--template", "no-such-template"),
              "template 'no-such-template' not found")
    cli_fails(det("e", "delete", "99999", "--yes"), "experiment 99999 not found")

    tpl = f"cli-tpl-{lab.mode}"
    det("template", "create", tpl, str(_write(lab.root / "t1.yaml", "description: one\n")), check=True)
    cli_fails(det("template", "create", tpl, str(lab.root / "t1.yaml")), "already exists")
    det("template", "set-value", "config", tpl, str(_write(lab.root / "t2.yaml", "description: two\n")), check=True)
    assert "description: two" in det("template", "describe", tpl, check=True).stdout
    assert tpl in det("template", "list", check=True).stdout
    det("template", "remove", tpl, check=True)
    assert tpl not in det("template", "list", check=True).stdout
