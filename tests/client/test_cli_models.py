"""`det model ...` on a really trained experiment, with an embedded master and with a server."""
import pathlib

import pytest

from tests.client.conftest import Env
from tests.e2e._helpers import det as det_process
from tests.client._cli import cli_fails as _fails, det, det_json

pytestmark = pytest.mark.slow


def test_model_commands(env: Env, tmp_path: pathlib.Path) -> None:
    name = f"{env.mode}-m-model"
    out = det("model", "create", name, "--description", "from the CLI", "--metadata", '{"team": "vision"}', check=True)
    assert f"Created model {name}" in out.stdout
    described = det_json("model", "describe", name)
    assert (described["description"], described["metadata"], described["latest_version"]) == (
        "from the CLI", {"team": "vision"}, None)

    ckpts = det_json("experiment", "lc", str(env.trained.experiment_id), "--best", "2")
    for i, c in enumerate(ckpts, start=1):
        reg = det("model", "register-version", name, c["uuid"], check=True).stdout
        assert f"version {i} of model {name}" in reg
    versions = det_json("model", "list-versions", name)
    assert [(v["version"], v["uuid"]) for v in versions] == [(2, ckpts[1]["uuid"]), (1, ckpts[0]["uuid"])]
    assert det_json("model", "describe", name)["latest_version"]["uuid"] == ckpts[1]["uuid"]
    assert ckpts[0]["uuid"] in det("model", "list-versions", name, check=True).stdout
    assert name in det("model", "describe", name, check=True).stdout

    det("model", "create", f"{env.mode}-m-zz", "--description", "aaa", check=True)
    names = [m["name"] for m in det_json("model", "list") if m["name"].startswith(f"{env.mode}-m-")]
    assert names == [name, f"{env.mode}-m-zz"]
    by_desc = [m["name"] for m in det_json("model", "list", "--sort-by", "description", "--order-by", "desc")
               if m["name"].startswith(f"{env.mode}-m-")]
    assert by_desc == [name, f"{env.mode}-m-zz"]
    assert name in det("model", "list", check=True).stdout

    before = det_json("model", "list")
    _fails(det("model", "create", name), name)
    _fails(det_process("model", "create", f"{env.mode}-bad", "--metadata", "{not json"), "not valid JSON")
    _fails(det("model", "create", f"{env.mode}-bad", "--metadata", "[1, 2]"), "JSON object")
    _fails(det("model", "register-version", name, "no-such-checkpoint"), "no-such-checkpoint")
    _fails(det("model", "register-version", "no-such-model", ckpts[0]["uuid"]), "no-such-model")
    _fails(det("model", "describe", "no-such-model"), "no-such-model")
    _fails(det("model", "list", "--sort-by", "size"), "invalid choice")
    assert det_json("model", "list") == before, "nothing stored"
    assert len(det_json("model", "list-versions", name)) == 2
