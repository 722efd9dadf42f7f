"""The rest of the 0.38 surface, each call with the meaning it has in Determined 0.38, against a Core API script
experiment that really ran, with the embedded master and with a server (both databases): the filters of
`list_experiments`, `stream_trials_metrics`, `Trial.logs(follow=True)`, the registry's workspaces
(`create_model(workspace_name=)`, `Model.move_to_workspace`, `get_versions`), and the CLI's 0.38 flags
(`det e create -i`, `det e config`, `det e download-model-def`, `--show_project`, `--csv`, `det e set name|labels`,
`det checkpoint download --mode`, `det checkpoint rm|delete`, `det e delete`, `det model create|move|list -w`,
`det model describe --version`, `det workspace|project` sorting and paging, `det e delete-tb-files`, `det t describe --metrics-summary`,
`det e describe 1,2 --csv|--outdir`).
"""
import csv
import io
import pathlib
import tarfile

import pytest
import yaml

from determined import errors
from determined.experimental import client
from tests.client._cli import cli_fails, det, det_json
from tests.client.test_sdk_038 import Lab, _write, lab, lab_mode, lab_root  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


def _experiment_count() -> int:
    return len(client.Determined().list_experiments())


def test_list_experiments_filters_and_stream_trials_metrics(lab: Lab) -> None:
    d = client.Determined()
    exp = d.get_experiment(lab.experiment_id)
    mine = [e.id for e in d.list_experiments(users=["determined"])]
    assert exp.id in mine and d.list_experiments(users=["nobody"]) == []
    assert [e.id for e in d.list_experiments(experiment_ids=[exp.id])] == [exp.id]
    assert exp.id in [e.id for e in d.list_experiments(project_id=1)]
    ws = d.create_workspace(f"filters-{lab.mode}")
    empty = ws.create_project("empty")
    assert d.list_experiments(project_id=empty.id) == []
    exp.set_labels(["alpha", "beta"])
    assert [e.id for e in client.list_experiments(labels=["beta", "other"])] == [exp.id]
    exp.set_labels([])
    exp.reload()
    assert exp.labels == []

    trial = exp.list_trials()[0]
    metrics = list(client.stream_trials_metrics([trial.id], "training"))
    assert [(m.trial_id, m.steps_completed, m.metrics) for m in metrics] == [(trial.id, 1, {"loss": 4.0}),
                                                                            (trial.id, 2, {"loss": 2.0})]
    assert [m.metrics for m in client.stream_trials_metrics([trial.id], "validation")] == [{"loss": 2.0}]
    followed = list(trial.logs(follow=True))  # an ended trial: every line, then the iterator ends
    assert any("hello from the trial, n=4" in line for line in followed) and followed == list(trial.logs())


def test_models_live_in_workspaces(lab: Lab) -> None:
    d = client.Determined()
    ws = d.create_workspace(f"registry-{lab.mode}")
    ckpt = d.get_experiment(lab.experiment_id).top_checkpoint()
    name = f"ws-model-{lab.mode}"
    model = client.create_model(name, description="in a workspace", workspace_name=ws.name)
    assert model.workspace_id == ws.id and d.get_model(name).workspace_id == ws.id
    assert [m.name for m in d.list_models(workspace_names=[ws.name])] == [name]
    assert [m.name for m in d.get_models(workspace_ids=[ws.id])] == [name]
    assert name not in [m.name for m in d.list_models(workspace_ids=[1])]

    models_before = len(d.list_models())
    with pytest.raises(errors.NotFoundError, match="workspace 'nope' not found; the workspaces are: 'Uncategorized'"):
        d.create_model(f"{name}-2", workspace_name="nope")
    with pytest.raises(errors.NotFoundError, match="the workspaces are"):
        model.move_to_workspace("nope")
    assert len(d.list_models()) == models_before and d.get_model(name).workspace_id == ws.id, "nothing stored"
    with pytest.raises(errors.APIError, match="not empty|model"):
        d.delete_workspace(ws.name)  # it holds the model

    model.move_to_workspace("Uncategorized")
    assert model.workspace_id == 1 and d.get_model(name).workspace_id == 1
    d.delete_workspace(ws.name)

    model.register_version(ckpt.uuid)
    model.register_version(ckpt.uuid)
    with pytest.warns(FutureWarning, match="list_versions"):
        versions = model.get_versions()
    assert [(type(v), v.model_version) for v in versions] == [(client.ModelVersion, 2), (client.ModelVersion, 1)]
    from determined.experimental import Determined as Determined013

    old_face = Determined013().get_model(name)  # seed 002: versions are Checkpoints, unchanged
    assert [c.uuid for c in old_face.get_versions()] == [ckpt.uuid, ckpt.uuid]
    model.delete()


def test_cli_flags_of_0_38(lab: Lab, tmp_path: pathlib.Path) -> None:
    exp_id = lab.experiment_id
    exp = client.get_experiment(exp_id)
    trial = exp.list_trials()[0]
    ckpt = exp.top_checkpoint()

    assert yaml.safe_load(det("e", "config", str(exp_id), check=True).stdout) == exp.config
    out = tmp_path / "code"
    out.mkdir()
    det("e", "download-model-def", str(exp_id), "--output-dir", str(out), check=True)
    with tarfile.open(out / f"experiment_{exp_id}_model_def.tgz") as tar:
        assert "train.py" in [pathlib.Path(n).name for n in tar.getnames()]
    cli_fails(det("e", "download-model-def", str(exp_id), "--output-dir", str(tmp_path / "none")), "not a directory")

    rows = list(csv.reader(io.StringIO(det("e", "list", "--show_project", "--csv", check=True).stdout)))
    assert rows[0][:3] == ["Workspace", "Project", "ID"]
    assert ["Uncategorized", "Uncategorized", str(exp_id)] in [r[:3] for r in rows[1:]]
    trial_rows = list(csv.reader(io.StringIO(det("e", "lt", str(exp_id), "--csv", check=True).stdout)))
    assert trial_rows[1][:2] == [str(trial.id), "COMPLETED"] and trial_rows[1][5] == "2"
    ckpt_rows = list(csv.reader(io.StringIO(det("e", "lc", str(exp_id), "--csv", check=True).stdout)))
    assert ckpt_rows[0][3] == "Validation loss" and ckpt.uuid in ckpt_rows[1]

    det("e", "set", "name", str(exp_id), "renamed-by-cli", check=True)
    det("e", "set", "labels", str(exp_id), "one, two", check=True)
    exp.reload()
    assert (exp.name, exp.labels) == ("renamed-by-cli", ["one", "two"])
    det("e", "set", "name", str(exp_id), "sdk-038", check=True)
    det("e", "set", "labels", str(exp_id), "", check=True)
    exp.reload()
    assert (exp.name, exp.labels) == ("sdk-038", [])

    for mode in ("direct", "master"):
        target = tmp_path / mode
        det("checkpoint", "download", ckpt.uuid, "--mode", mode, "-o", str(target), check=True)
        assert (target / "weights.txt").read_text() == "n=4"
    logs = det("t", "logs", str(trial.id), "--agent-id", "a1", "--container-id", "c1", check=True).stdout
    assert "hello from the trial, n=4" in logs

    tables = det("e", "describe", f"{exp_id},{exp_id}", "--csv", "--metrics", check=True).stdout.split("\n\n")
    experiments, trials, workloads = (list(csv.reader(io.StringIO(t))) for t in tables)
    assert experiments[0][:2] == ["Experiment ID", "State"] and [r[:2] for r in experiments[1:]] == \
        [[str(exp_id), "COMPLETED"]] * 2
    assert trials[1][:3] == [str(trial.id), str(exp_id), "COMPLETED"] and '"n": 4' in trials[1][5]
    last = dict(zip(workloads[0], workloads[2]))
    assert (last["# of Batches"], last["Training loss"], last["Validation loss"], last["Checkpoint UUID"]) == \
        ("2", "2.0", "2.0", ckpt.uuid)
    det("e", "describe", str(exp_id), "--outdir", str(tmp_path), check=True)
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == ["experiments.csv", "trials.csv", "workloads.csv"]
    assert ckpt.uuid in (tmp_path / "workloads.csv").read_text()
    cli_fails(det("e", "describe", "1,x"), "not 'x'")

    summary = det_json("t", "describe", str(trial.id), "--metrics-summary")
    assert summary["training"]["loss"] == {"count": 2, "last": 2.0, "min": 2.0, "max": 4.0, "mean": 3.0}
    assert summary["validation"]["loss"]["count"] == 1 and summary["extra"]["score"]["last"] == 4
    table = det("t", "describe", str(trial.id), "--metrics-summary", check=True).stdout
    assert "Mean" in table and "score" in table

    from determined.cli import experiment as cli_experiment
    from determined.cli.main import _parser

    assert _parser().parse_args(["e", "unpause", "3"]).func is cli_experiment.activate


def test_cli_create_with_include_then_remove_files_and_delete(lab: Lab, tmp_path: pathlib.Path) -> None:
    """`det e create -i` adds files to the model definition; `det checkpoint rm|delete` and `det e delete` remove
    what they name; bad input stores nothing."""
    extra = _write(tmp_path / "extra.txt", "included by -i")
    before = _experiment_count()
    cli_fails(det("e", "create", str(lab.config), str(lab.model_dir), "-i", str(tmp_path / "missing.txt")),
              "--include", "does not exist")
    cli_fails(det("e", "create", str(lab.config), str(tmp_path / "no-dir")), "MODEL_DEF", "not a directory")
    assert _experiment_count() == before, "nothing stored"

    template = f"include-tpl-{lab.mode}"
    det("template", "create", template, str(_write(tmp_path / "tpl.yaml", "labels: [from-tpl]\nhyperparameters:\n"
                                                                         "  n: 7\n  k: 3\n")), check=True)
    proc = det("e", "create", str(lab.config), str(lab.model_dir), "-i", str(extra), "--template", template,
               "--config", f"name=include-{lab.mode}", "--config", "hyperparameters.n=5", check=True)
    exp_id = int(next(x for x in proc.stdout.splitlines() if x.startswith("Created experiment")).split()[2])
    exp = client.get_experiment(exp_id)
    assert exp.wait(interval=0.2) == client.ExperimentState.COMPLETED
    hparams = exp.config["hyperparameters"]
    assert (hparams["n"]["val"], hparams["k"]["val"], exp.labels) == (5, 3, ["from-tpl"]), "override, then template"
    assert any("hello from the trial, n=5" in line for line in exp.list_trials()[0].iter_logs()), "n=5 ran"

    events = lab.data_dir / "tensorboard" / f"experiment_{exp_id}"
    assert any(events.rglob("events.out.tfevents.*")), "the trial wrote its TensorBoard event files"
    assert "Deleted the TensorBoard files" in det("e", "delete-tb-files", str(exp_id), check=True).stdout
    assert not events.exists()
    exp.delete_tensorboard_files()  # none left: nothing to do
    assert "has no TensorBoard files" in det("e", "delete-tb-files", str(exp_id), check=True).stdout
    cli_fails(det("e", "delete-tb-files", "99999"), "experiment 99999 not found")
    with tarfile.open(exp.download_code(str(tmp_path))) as tar:
        assert {"train.py", "extra.txt"} <= {pathlib.Path(n).name for n in tar.getnames()}

    ckpt = exp.top_checkpoint()
    det("checkpoint", "rm", ckpt.uuid, "--glob", "*.bin", "--yes", check=True)
    ckpt.reload()
    assert ckpt.state == client.CheckpointState.PARTIALLY_DELETED and "optimizer.bin" not in ckpt.resources
    det("checkpoint", "delete", ckpt.uuid, "--yes", check=True)
    ckpt.reload()
    assert ckpt.state == client.CheckpointState.DELETED
    det("e", "delete", str(exp_id), "--yes", check=True)
    with pytest.raises(errors.NotFoundError):
        client.get_experiment(exp_id)
    assert _experiment_count() == before


def test_cli_registry_and_workspace_flags_of_0_38(lab: Lab) -> None:
    ws_a, ws_b = f"zz-{lab.mode}", f"aa-{lab.mode}"
    for ws in (ws_a, ws_b):
        det("workspace", "create", ws, check=True)
    by_name = [w["name"] for w in det_json("workspace", "list", "--sort-by", "name", "--order-by", "desc")]
    assert by_name.index(ws_a) < by_name.index(ws_b) and by_name == sorted(by_name, key=str.lower, reverse=True)
    ids = [w["id"] for w in det_json("workspace", "list")]
    assert ids == sorted(ids) and ids[0] == 1
    assert [w["id"] for w in det_json("workspace", "list", "--limit", "1", "--offset", "1")] == ids[1:2]
    for project in ("p2", "P1", "p3"):
        det("project", "create", ws_a, project, check=True)
    assert [p["name"] for p in det_json("project", "list", ws_a, "--sort-by", "name")] == ["P1", "p2", "p3"]
    assert [p["name"] for p in det_json("workspace", "list-projects", ws_a, "--order-by", "desc")] == \
        ["p3", "P1", "p2"]
    edited = det_json("project", "edit", ws_a, "p3", "--new_name", "p4", "--description", "renamed")
    assert (edited["name"], edited["description"]) == ("p4", "renamed")
    assert det_json("project", "describe", ws_a, "p4", "-a")["experiments"] == []
    assert det_json("workspace", "edit", ws_b, "--name", ws_b + "-2")["name"] == ws_b + "-2"

    ckpt = client.get_experiment(lab.experiment_id).top_checkpoint()
    model = f"cli-ws-model-{lab.mode}"
    det("model", "create", model, "-w", ws_a, check=True)
    assert [m["name"] for m in det_json("model", "list", "-w", ws_a)] == [model]
    cli_fails(det("model", "list", "-w", "nope"), "'nope' not found", "Uncategorized")
    cli_fails(det("model", "create", model + "-x", "-w", "nope"), "workspace 'nope' not found")
    det("model", "register-version", model, ckpt.uuid, check=True)
    det("model", "register-version", model, ckpt.uuid, check=True)
    assert det_json("model", "describe", model, "--version", "1")["version"]["version"] == 1
    assert det_json("model", "describe", model)["latest_version"]["version"] == 2
    det("model", "move", model, "-w", ws_b + "-2", check=True)
    assert det_json("model", "describe", model)["workspace_id"] == client.get_workspace(ws_b + "-2").id
    cli_fails(det("model", "move", model, "-w", "nope"), "not found")
    det("model", "delete", model, "--yes", check=True)
    for ws in (ws_a, ws_b + "-2"):
        det("workspace", "delete", ws, "--yes", check=True)


def test_only_owners_and_admins_change_projects_and_move_experiments(lab: Lab) -> None:
    admin = client.Determined(user="admin")
    name = f"bob-{lab.mode}"
    admin.create_user(name, password="")
    bob = client.Determined(user=name)
    ws = bob.create_workspace(f"bobs-{lab.mode}")
    project = ws.create_project("bobs-project")
    theirs = client.Determined()  # the user `determined`, not bob
    as_other = theirs.get_project(project.id)
    for change in (lambda: as_other.set_name("taken"), lambda: as_other.set_description("mine"), as_other.archive,
                   lambda: theirs.get_workspace(ws.name).delete_project("bobs-project")):
        with pytest.raises(errors.APIError, match=f"owned by '{name}'") as info:
            change()
        assert info.value.status_code == 403
    as_other.reload()
    assert (as_other.name, as_other.description, as_other.archived) == ("bobs-project", "", False), "nothing changed"
    with pytest.raises(errors.APIError, match="owned by"):  # bob may not move `determined`'s experiment
        bob.get_experiment(lab.experiment_id).move_to_project(ws.name, "bobs-project")
    assert theirs.get_experiment(lab.experiment_id).project_id == 1
    with pytest.raises(errors.APIError, match="owned by"):
        bob.get_experiment(lab.experiment_id).delete_tensorboard_files()

    as_admin = admin.get_project(project.id)
    as_admin.set_description("set by an admin")
    as_admin.archive()
    assert bob.get_project(project.id).archived
    as_admin.unarchive()
    admin.get_workspace(ws.name).delete_project("bobs-project")
    admin.delete_workspace(ws.name)
