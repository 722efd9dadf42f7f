"""`det job list|update`, `det resource-pool list`, `det agent list` and `det slot list` on the data dir's master
(in-process: no scheduler runs, so no agent and no slot)."""
import pathlib

from determined.master import embedded
from tests.client._cli import cli_fails, det, det_json
from tests.master._helpers import config, model_def


def test_job_list_and_update_through_the_cli(det_data_dir: pathlib.Path) -> None:
    session = embedded.in_process_session(det_data_dir)
    for name, priority in (("first", 42), ("second", 42), ("urgent", 10)):
        session.post("/experiments", {"config": {**config(max_trials=1), "name": name,
                                                 "resources": {"priority": priority}},
                                      "model_definition": model_def()})
    jobs = det_json("job", "list")
    assert [(j["name"], j["priority"], j["summary"]["state"]) for j in jobs] == [
        ("urgent", 10, "STATE_QUEUED"), ("first", 42, "STATE_QUEUED"), ("second", 42, "STATE_QUEUED")]
    table = det("j", "ls", check=True).stdout
    assert "Priority" in table and "Weight" not in table and "urgent (3)" in table
    assert table.index("urgent") < table.index("first") < table.index("second")
    ids = {j["name"]: j["job_id"] for j in jobs}

    moved = det("job", "update", ids["second"], "--ahead-of", ids["first"], check=True)
    assert "removed in 0.35" in moved.stderr and "0 job(s) ahead" not in moved.stdout
    assert [j["name"] for j in det_json("job", "list")] == ["urgent", "second", "first"]
    det("job", "update", ids["first"], "-p", "5", check=True)
    assert [j["name"] for j in det_json("job", "list")] == ["first", "urgent", "second"]
    cli_fails(det("job", "update", ids["first"], "-p", "0"), "priority", "from 1")
    cli_fails(det("job", "update", ids["first"], "--weight", "2"), "fair_share")
    cli_fails(det("job", "update", ids["first"], "-p", "3", "-w", "2"), "not allowed with")  # one change at a time

    [pool] = det_json("rp", "list")
    assert (pool["name"], pool["default_compute_pool"], pool["scheduler_type"], pool["stats"]["queued_count"]) == (
        "default", True, "SCHEDULER_TYPE_PRIORITY", 3)
    assert "default" in det("resource-pool", "list", check=True).stdout
    assert det_json("agent", "list") == [] and "No agents" in det("a", "ls", check=True).stdout
    assert "No slots" in det("slot", "list", check=True).stdout
