"""Workspaces and projects through the SDK (`client.create_workspace`, `Workspace`, `Project`,
`move_to_project`) and the CLI (`det workspace`, `det project`, `det e create --project`, `det e move`), with an
embedded master and with a server on the same data dir; bad input is refused and stores nothing.

Experiments here are created paused (nothing trains): where an experiment lives does not depend on its trials.
"""
import dataclasses
import pathlib
from typing import Any, Dict, Iterator, Optional

import pytest
import yaml

from determined import errors
from determined.experimental import client
from determined.experimental.client import Determined, Project, Workspace
from determined.master import embedded
from tests.client._cli import cli_fails, det, det_json


@dataclasses.dataclass
class Env:
    mode: str
    data_dir: pathlib.Path
    url: Optional[str]
    config_file: pathlib.Path
    model_dir: pathlib.Path


@pytest.fixture(scope="module", params=["embedded", "server"])
def ws_master(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp(f"workspaces-{request.param}")
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text("print('never runs: the experiments stay paused')\n")
    config = {"name": "ws-test", "entrypoint": "python3 train.py",
              "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}}}
    config_file = root / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    data_dir = root / "det-data"
    data_dir.mkdir()
    if request.param == "embedded":
        yield Env("embedded", data_dir, None, config_file, model_dir)
        return
    master = embedded.start(data_dir)
    try:
        yield Env("server", data_dir, master.url, config_file, model_dir)
    finally:
        master.stop()


@pytest.fixture
def env(ws_master: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Env:
    monkeypatch.setenv("DET_DATA_DIR", str(ws_master.data_dir))
    monkeypatch.delenv("DET_USER", raising=False)
    if ws_master.url:
        monkeypatch.setenv("DET_MASTER", ws_master.url)
    else:
        monkeypatch.delenv("DET_MASTER", raising=False)
    monkeypatch.setattr(client, "_default", None)
    monkeypatch.chdir(tmp_path)
    return ws_master


def _create_paused(env: Env, *extra: str, config: Optional[Dict[str, Any]] = None) -> int:
    config_file = env.config_file
    if config is not None:
        config_file = env.config_file.parent / "config-extra.yaml"
        config_file.write_text(yaml.safe_dump({**yaml.safe_load(env.config_file.read_text()), **config}))
    proc = det("experiment", "create", "--paused", str(config_file), str(env.model_dir), *extra, check=True)
    return int(proc.stdout.split("Created experiment ")[1].split()[0])


def _experiment(d: Determined, experiment_id: int) -> Dict[str, Any]:
    return d._session.get(f"/experiments/{experiment_id}")["experiment"]  # type: ignore[no-any-return]


def _counts(d: Determined) -> Dict[str, int]:
    workspaces = d._session.get("/workspaces")["workspaces"]
    projects = d._session.get("/projects")["projects"]
    experiments = d._session.get("/experiments")["experiments"]
    return {"workspaces": len(workspaces), "projects": len(projects), "experiments": len(experiments)}


def test_default_workspace_and_project_hold_new_experiments(env: Env) -> None:
    d = Determined()
    default = d.get_workspace("Uncategorized")
    assert (default.id, default.immutable) == (1, True)
    assert [w.name for w in client.list_workspaces()][0] == "Uncategorized"
    project = default.get_project("Uncategorized")
    assert (project.id, project.workspace_id) == (1, 1)
    exp_id = _create_paused(env)
    e = _experiment(d, exp_id)
    assert (e["project_id"], e["workspace_id"], e["project"], e["workspace"]) == (1, 1, "Uncategorized", "Uncategorized")
    project.reload()
    assert project.n_experiments >= 1 and exp_id in [x.id for x in project.list_experiments()]
    # The default workspace and project are never renamed, archived or deleted.
    for action in (lambda: default.set_name("x"), default.archive, lambda: d.delete_workspace("Uncategorized"),
                   project.archive, lambda: project.set_name("y"), lambda: default.delete_project("Uncategorized")):
        with pytest.raises(errors.APIError, match="default") as info:
            action()
        assert info.value.status_code == 403
    assert d.get_project(1).name == "Uncategorized" and not d.get_workspace("Uncategorized").archived


def test_sdk_workspaces_projects_and_moves(env: Env) -> None:
    d = Determined()
    ws = client.create_workspace(f"team-{env.mode}")
    assert isinstance(ws, Workspace) and ws.username == "determined" and not ws.archived
    assert client.get_workspace(ws.name).id == ws.id
    p = ws.create_project("vision", description="image models")
    assert isinstance(p, Project) and (p.workspace_id, p.description, p.n_experiments) == (ws.id, "image models", 0)
    assert [x.name for x in ws.list_projects()] == ["vision"]
    assert ws.get_project("vision").id == p.id

    # Config names place an experiment; `move_to_project` and `det e move` move it.
    exp_id = _create_paused(env, config={"workspace": ws.name, "project": "vision"})
    assert _experiment(d, exp_id)["project_id"] == p.id
    assert [x.id for x in p.list_experiments()] == [exp_id]
    other = ws.create_project("audio")
    exp = d.get_experiment(exp_id)
    exp.move_to_project(ws.name, "audio")
    assert (exp.project_id, exp.workspace_id) == (other.id, ws.id)
    assert _experiment(d, exp_id)["project"] == "audio"
    det("experiment", "move", str(exp_id), "Uncategorized", "Uncategorized", check=True)
    assert _experiment(d, exp_id)["project_id"] == 1

    # Rename, describe, archive, unarchive.
    p.set_name("vision2")
    p.set_description("renamed")
    p.reload()
    assert (p.name, p.description) == ("vision2", "renamed")
    p.add_note("plan", "lr 0.1 next")
    p.add_note("log", "ran 3")
    p.remove_note("plan")
    assert p.notes == [{"name": "log", "contents": "ran 3"}] and d.get_project(p.id).notes == p.notes
    with pytest.raises(ValueError, match="No note"):
        p.remove_note("plan")
    with pytest.raises(errors.APIError, match="exactly the keys"):
        d._session.request("PUT", f"/projects/{p.id}/notes", json={"notes": [{"name": "x"}]})
    ws.set_name(f"team-{env.mode}-2")
    assert d.get_workspace(f"team-{env.mode}-2").id == ws.id
    p.archive()
    assert p.archived and d.get_project(p.id).archived
    with pytest.raises(errors.APIError, match="archived"):  # an archived project takes no experiments
        exp.move_to_project(ws.name, "vision2")
    p.unarchive()
    ws.archive()
    assert d.get_workspace(ws.name).archived
    before = _counts(d)
    with pytest.raises(errors.APIError, match="archived"):
        ws.create_project("more")
    proc = det("experiment", "create", "--paused", str(env.config_file), str(env.model_dir), "--project",
               f"{ws.name}/audio")
    cli_fails(proc, "archived", "unarchive")
    assert _counts(d) == before  # nothing stored
    ws.unarchive()

    # A project holding an experiment is not deleted; once empty it is.
    exp.move_to_project(ws.name, "audio")
    with pytest.raises(errors.APIError, match="not empty"):
        ws.delete_project("audio")
    with pytest.raises(errors.APIError, match="not empty"):
        client.delete_workspace(ws.name)
    exp.move_to_project("Uncategorized", "Uncategorized")
    # A model of the workspace keeps it too, until it moves.
    model = d._session.post(f"/models/ws-model-{env.mode}", {"workspace_id": ws.id})["model"]
    assert (model["workspace_id"], model["workspace"]) == (ws.id, ws.name)
    with pytest.raises(errors.APIError, match="1 model"):
        client.delete_workspace(ws.name)
    moved = d._session.patch(f"/models/ws-model-{env.mode}", {"workspace_id": 1})["model"]
    assert (moved["workspace_id"], moved["workspace"]) == (1, "Uncategorized")
    ws.delete_project("audio")
    assert [x.name for x in ws.list_projects()] == ["vision2"]
    client.delete_workspace(ws.name)  # its empty project goes with it
    with pytest.raises(errors.NotFoundError, match="Uncategorized"):  # the error names the workspaces that exist
        client.get_workspace(ws.name)
    with pytest.raises(errors.NotFoundError):
        d.get_project(p.id)


def test_bad_input_is_refused_and_stores_nothing(env: Env) -> None:
    """The master refuses each (the same code in both modes: the embedded run checks what its create path adds)."""
    d = Determined()
    ws = d.create_workspace(f"bad-{env.mode}")
    ws.create_project("p")
    before = _counts(d)
    # Unknown names in a config: the error names what exists.
    for config, needle in (({"workspace": "nope", "project": "p"}, "the workspaces are"),
                           ({"workspace": ws.name, "project": "nope"}, "its projects are: 'p'")):
        config_file = env.config_file.parent / "bad.yaml"
        config_file.write_text(yaml.safe_dump({**yaml.safe_load(env.config_file.read_text()), **config}))
        cli_fails(det("experiment", "create", "--paused", str(config_file), str(env.model_dir)), needle)
    with pytest.raises(errors.APIError, match="already exists") as dup:
        d.create_workspace(ws.name)
    assert dup.value.status_code == 409
    if env.mode == "embedded":
        assert _counts(d) == before
        return
    with pytest.raises(errors.APIError, match="already has a project"):
        ws.create_project("p")
    for bad in ("a/b", " lead", "x" * 300, "bell\x07"):
        with pytest.raises(errors.APIError, match="invalid workspace name"):
            d.create_workspace(bad)
        with pytest.raises(errors.APIError, match="invalid project name"):
            ws.create_project(bad)
    with pytest.raises(errors.APIError, match="unknown field"):
        d._session.post("/workspaces", {"name": "z", "quota": 3})
    with pytest.raises(errors.APIError, match="description"):
        ws.create_project("q", description="\x00")
    cli_fails(det("experiment", "create", "--paused", str(env.config_file), str(env.model_dir), "--project_id",
                  "999"), "project 999 not found")
    cli_fails(det("experiment", "create", "--paused", str(env.config_file), str(env.model_dir), "--project", "x"),
              "WORKSPACE/PROJECT")
    cli_fails(det("experiment", "move", "1", ws.name, "nope"), "not found")
    assert _counts(d) == before

    # Another user's workspace: only its owner or an admin changes it.
    admin = Determined(user="admin")
    admin._session.post("/users", {"username": "alice", "password": ""})
    alices = Determined(user="alice").create_workspace("alice-ws")
    mine = Workspace(d._session, workspace_id=alices.id)
    for action in (lambda: mine.set_name("taken-over"), mine.archive, lambda: d.delete_workspace(alices.name)):
        with pytest.raises(errors.APIError, match="owned by 'alice'") as info:
            action()
        assert info.value.status_code == 403
    assert not d.get_workspace(alices.name).archived
    Workspace(admin._session, workspace_id=alices.id).archive()  # an admin may
    admin.delete_workspace(alices.name)


def test_cli_workspace_and_project_commands(env: Env) -> None:
    """Every command with a server; the embedded master (the same CLI code over an in-process session, whose
    writes the SDK tests above cover) runs the main path only."""
    name = f"cli-{env.mode}"
    full = env.mode == "server"
    assert "Created workspace" in det("workspace", "create", name, check=True).stdout
    det("project", "create", name, "nlp", "--description", "text", check=True)
    exp2 = _create_paused(env, "--project", f"{name}/nlp")
    if full:
        assert name in [w["name"] for w in det_json("workspace", "list")]
        projects = det_json("project", "list", name)
        assert [(p["name"], p["description"]) for p in projects] == [("nlp", "text")]
        exp_id = _create_paused(env, "--project_id", str(projects[0]["id"]))
        described = det_json("project", "describe", name, "nlp")
        assert described["n_experiments"] == 2 and [e["id"] for e in described["experiments"]] == [exp2, exp_id]
        assert "nlp" in det("workspace", "describe", name, check=True).stdout
        det("e", "move", str(exp_id), "Uncategorized", "Uncategorized", check=True)
    assert [e["id"] for e in det_json("project", "list-experiments", name, "nlp")] == [exp2]
    if full:
        det("project", "edit", name, "nlp", "--name", "nlp2", "--description", "more text", check=True)
        det("project", "archive", name, "nlp2", check=True)
        assert det_json("workspace", "list-projects", name)[0]["archived"] is True
        det("project", "unarchive", name, "nlp2", check=True)
        cli_fails(det("project", "delete", name, "nlp2", "--yes"), "not empty", "det experiment move")
        det("e", "move", str(exp2), "Uncategorized", "Uncategorized", check=True)
        assert "Nothing deleted" in det("project", "delete", name, "nlp2", stdin="n\n").stdout
        det("project", "delete", name, "nlp2", "--yes", check=True)
        det("workspace", "edit", name, "--name", name + "-x", check=True)
        name += "-x"
        det("workspace", "archive", name, check=True)
        cli_fails(det("project", "create", name, "late"), "archived")
        det("workspace", "unarchive", name, check=True)
    else:
        det("e", "move", str(exp2), "Uncategorized", "Uncategorized", check=True)
    det("workspace", "delete", name, "--yes", check=True)
    cli_fails(det("workspace", "describe", name), "not found", "Uncategorized")
