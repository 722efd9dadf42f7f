"""Workspace <-> resource pool bindings and workspace default pools (Determined 0.23.4+) over REST and the CLI: who
may change and list them (two users and an admin), a pool bound to workspace A refusing an experiment of workspace
B with an error that names the binding, the workspace's default pool used when a config names none; and queue
positions (`ahead_of`) kept across a restart of the master. The PostgreSQL stage runs them again on PostgreSQL."""
import json
import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from determined import errors
from determined.master.scheduling import pools
from tests import _postgres
from tests.auth._helpers import InProcessMaster, add_user
from tests.client._cli import cli_fails, det, det_json
from tests.master._helpers import config, model_def

BINDINGS = "/resource-pools/{}/workspace-bindings"
CLUSTER = pools.parse({}, [{"pool_name": "default"}, {"pool_name": "gpus"}, {"pool_name": "cpus"}])


def _refused(status: int, call: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call()
    assert info.value.status_code == status, str(info.value)
    return str(info.value)


@pytest.fixture
def team(master: InProcessMaster) -> Dict[str, Any]:
    """An admin, alice and bob; workspaces team-a and team-b, each with a project `p`."""
    master.master.pools = CLUSTER
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    out: Dict[str, Any] = {"admin": admin, "alice": master.session("alice", "a-pw"),
                           "bob": master.session("bob", "b-pw"), "anonymous": master.raw()}
    for name in ("team-a", "team-b"):
        ws = admin.post("/workspaces", {"name": name})["workspace"]
        admin.post(f"/workspaces/{ws['id']}/projects", {"name": "p"})
        out[name] = ws["id"]
    return out


def submit(session: Any, workspace: str, **resources: Any) -> Dict[str, Any]:
    cfg = {**config(max_trials=1), "workspace": workspace, "project": "p"}
    if resources:
        cfg["resources"] = resources
    return session.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]


def bound(session: Any, pool: str) -> List[str]:
    return [w["name"] for w in session.get(BINDINGS.format(pool))["workspaces"]]


def test_only_an_admin_binds_pools_and_anyone_logged_in_lists_them(team: Dict[str, Any]) -> None:
    admin, alice, bob = team["admin"], team["alice"], team["bob"]
    body = {"workspace_names": ["team-a"]}
    for user in (alice, bob):
        for method in ("POST", "DELETE", "PUT"):
            message = _refused(403, lambda: user.request(method, BINDINGS.format("gpus"), json=body))
            assert "only an admin" in message
    assert bound(bob, "gpus") == [], "nothing refused was stored"
    assert "authentication required" in _refused(401, lambda: team["anonymous"].get(BINDINGS.format("gpus")))

    answer = admin.post(BINDINGS.format("gpus"), {"resource_pool_name": "gpus", "workspace_ids": [team["team-a"]],
                                                 "workspace_names": ["team-b"]})
    assert answer["workspace_ids"] == [team["team-a"], team["team-b"]]
    assert bound(alice, "gpus") == bound(bob, "gpus") == ["team-a", "team-b"]
    assert bound(alice, "cpus") == []
    assert admin.request("DELETE", BINDINGS.format("gpus"), json={"workspace_names": ["team-a"]})["workspaces"] == [
        {"id": team["team-b"], "name": "team-b"}]
    admin.request("PUT", BINDINGS.format("gpus"), json={"workspace_names": ["team-a"]})
    assert bound(bob, "gpus") == ["team-a"]

    # Bad requests name the problem and change nothing.
    assert "default pools cannot be bound" in _refused(400, lambda: admin.post(BINDINGS.format("default"), body))
    assert "'nope' not found" in _refused(404, lambda: admin.post(BINDINGS.format("gpus"),
                                                                  {"workspace_names": ["nope"]}))
    assert "pools of this master are default, gpus, cpus" in _refused(404, lambda: admin.post(
        BINDINGS.format("tpus"), body))
    assert "not the pool of the path" in _refused(400, lambda: admin.post(
        BINDINGS.format("gpus"), {"resource_pool_name": "cpus", "workspace_names": ["team-b"]}))
    assert "at least one workspace" in _refused(400, lambda: admin.post(BINDINGS.format("gpus"), {}))
    _refused(400, lambda: admin.post(BINDINGS.format("gpus"), {"workspace_ids": ["1"]}))  # the model: ids are ints
    assert bound(bob, "gpus") == ["team-a"]
    admin.request("PUT", BINDINGS.format("gpus"), json={})  # replaced by none: unbound
    assert bound(bob, "gpus") == []


def test_a_pool_bound_to_workspace_a_refuses_an_experiment_of_workspace_b(team: Dict[str, Any]) -> None:
    admin, alice, bob = team["admin"], team["alice"], team["bob"]
    admin.post(BINDINGS.format("gpus"), {"workspace_names": ["team-a"]})
    message = _refused(400, lambda: submit(bob, "team-b", resource_pool="gpus"))
    assert "resource pool 'gpus' is bound to workspace(s) 'team-a'" in message
    assert "workspace 'team-b' may not use it" in message and "default, cpus" in message
    assert admin.get("/experiments")["experiments"] == [], "nothing refused was stored"
    in_a = submit(alice, "team-a", resource_pool="gpus")
    in_b = submit(bob, "team-b", resource_pool="cpus")

    # The pool of a job moved with `det job update --resource-pool`, and an experiment moved to another workspace,
    # are held to the same bindings.
    jobs = {j["entity_id"]: j["job_id"] for j in bob.get("/job-queues")["jobs"]}
    assert "bound to workspace(s) 'team-a'" in _refused(400, lambda: bob.post(
        "/job-queues", {"updates": [{"job_id": jobs[str(in_b["id"])], "resource_pool": "gpus"}]}))
    assert "bound to workspace(s) 'team-a'" in _refused(400, lambda: alice.post(
        f"/experiments/{in_a['id']}/move", {"workspace": "team-b", "project": "p"}))

    admin.request("DELETE", BINDINGS.format("gpus"), json={"workspace_names": ["team-a"]})
    assert submit(bob, "team-b", resource_pool="gpus")["config"]["resources"]["resource_pool"] == "gpus"


def test_workspace_default_pools_are_an_admins_and_serve_configs_that_name_no_pool(team: Dict[str, Any]) -> None:
    admin, alice, bob = team["admin"], team["alice"], team["bob"]
    a, b = team["team-a"], team["team-b"]
    assert "only an admin" in _refused(403, lambda: alice.patch(f"/workspaces/{a}", {"default_compute_pool": "gpus"}))
    assert "only an admin" in _refused(403, lambda: bob.post("/workspaces", {"name": "c", "default_aux_pool": "cpus"}))
    assert [w["name"] for w in bob.get("/workspaces")["workspaces"]] == ["Uncategorized", "team-a", "team-b"]

    admin.post(BINDINGS.format("gpus"), {"workspace_names": ["team-a"]})
    assert "bound to workspace(s) 'team-a'" in _refused(400, lambda: admin.patch(
        f"/workspaces/{b}", {"default_compute_pool": "gpus"}))
    admin.patch(f"/workspaces/{a}", {"default_compute_pool": "gpus", "default_aux_pool": "cpus"})
    for user in (alice, bob):
        pools_a = user.get(f"/workspaces/{a}/available-resource-pools")
        assert (pools_a["resource_pools"], pools_a["bound_resource_pools"], pools_a["default_compute_pool"],
                pools_a["default_aux_pool"]) == (["default", "gpus", "cpus"], ["gpus"], "gpus", "cpus")
        assert user.get(f"/workspaces/{b}/available-resource-pools")["resource_pools"] == ["default", "cpus"]

    exp = submit(alice, "team-a")  # names no pool: the workspace's default compute pool
    assert exp["config"]["resources"]["resource_pool"] == "gpus"
    [job] = [j for j in alice.get("/job-queues")["jobs"] if j["entity_id"] == str(exp["id"])]
    assert job["resource_pool"] == "gpus"
    assert submit(bob, "team-b")["config"]["resources"].get("resource_pool", "") == ""  # the cluster's default

    # Unbinding team-a would leave it a default pool it may not use: refused, naming it.
    message = _refused(400, lambda: admin.request("PUT", BINDINGS.format("gpus"), json={"workspace_names": ["team-b"]}))
    assert "default compute pool of workspace 'team-a'" in message
    assert bound(alice, "gpus") == ["team-a"]
    admin.patch(f"/workspaces/{a}", {"default_compute_pool": ""})  # back to the cluster's default
    assert alice.get(f"/workspaces/{a}/available-resource-pools")["default_compute_pool"] == "default"


# The restarted master runs in a new process: nothing the first one held in memory reaches it.
_RESTARTED = """
import json, sys
from determined.master.master import Master
from determined.master.scheduling import experiment_jobs, jobs, scheduler
master = Master(sys.argv[1], sys.argv[2] or None, run_scheduler=False)
with master.read() as s:
    order = [j.name for j in jobs.all_jobs(s)]
with master.write() as s:
    first = [t.experiment_id for t in scheduler.pick_trials(s, 1)]
master.stop()
print(json.dumps({"order": order, "first": first}))
"""


def test_queue_positions_survive_a_restart_of_the_master(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    first = InProcessMaster(data_dir)
    admin = first.session("admin")
    ids = []
    for name in ("a", "b", "c"):
        exp = admin.post("/experiments", {"config": config(max_trials=1, name=name), "model_definition": model_def()})
        ids.append(exp["experiment"]["id"])
    jobs = {j["name"]: j["job_id"] for j in admin.get("/job-queues")["jobs"]}
    admin.post("/job-queues", {"updates": [{"job_id": jobs["c"], "ahead_of": jobs["a"]}]})
    assert [j["name"] for j in admin.get("/job-queues")["jobs"]] == ["c", "a", "b"]
    first.master.stop()

    db_url = _postgres.database_url_for_subprocesses(data_dir) or ""
    proc = subprocess.run([sys.executable, "-c", _RESTARTED, str(data_dir), db_url], capture_output=True, text=True,
                          timeout=120, cwd=str(pathlib.Path(__file__).parents[2]))
    assert proc.returncode == 0, proc.stderr
    restarted = json.loads(proc.stdout.strip().splitlines()[-1])
    # the order, and the scheduler starting the job the queue shows first
    assert restarted == {"order": ["c", "a", "b"], "first": [ids[2]]}


def test_bindings_and_workspace_pools_through_the_cli(det_data_dir: pathlib.Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pools, "DEFAULT", CLUSTER)  # the in-process master of `det` gets these pools
    cli_fails(det("rp", "bindings", "add", "gpus", "team-a"), "only an admin", "'determined' is not an admin")
    det("-u", "admin", "workspace", "create", "team-a", check=True)
    det("-u", "admin", "workspace", "create", "team-b", "--default-aux-pool", "cpus", check=True)
    assert det_json("-u", "admin", "rp", "bindings", "add", "gpus", "team-a", "--workspace", "team-b") == {
        "resource_pool": "gpus", "workspaces": ["team-a", "team-b"]}
    assert det_json("-u", "admin", "rp", "bindings", "remove", "gpus", "team-b")["workspaces"] == ["team-a"]
    table = det("rp", "bindings", "list-workspaces", "gpus", check=True).stdout
    assert "Resource Pool" in table and "team-a" in table and "team-b" not in table

    det("-u", "admin", "workspace", "edit", "team-a", "--default-compute-pool", "gpus", check=True)
    table = det("w", "list-pools", "team-a", check=True).stdout
    assert "Available Resource Pools" in table and "default, gpus, cpus" in table
    cli_fails(det("-u", "admin", "workspace", "edit", "team-b", "--default-compute-pool", "gpus"),
              "bound to workspace(s) 'team-a'")
