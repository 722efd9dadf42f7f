"""The master config's `resource_manager` mapping and `resource_pools` reach the master (`det master up --config`),
and the master holds submissions and edits to them: an unknown pool, a priority above `priority_limit`."""
import argparse
import pathlib
from typing import Any, Dict

import pytest

from determined import errors
from determined.cli import master as master_cli
from determined.master.scheduling import pools
from tests.auth._helpers import InProcessMaster, add_user
from tests.master._helpers import config, model_def


def _settings(tmp_path: pathlib.Path, text: str) -> Dict[str, Any]:
    path = tmp_path / "master.yaml"
    path.write_text(text)
    args = argparse.Namespace(config=str(path))
    return master_cli._settings(args)


def test_determineds_resource_manager_mapping_and_pools_are_read(tmp_path: pathlib.Path) -> None:
    settings = _settings(tmp_path, """
resource_manager:
  type: agent
  scheduler: {type: priority, preemption: true}
  default_compute_resource_pool: big
  priority_limit: 10
resource_pools:
  - {pool_name: big, slots: [0]}
  - {pool_name: small, slots: [1], scheduler: {type: fair_share}}
""")
    assert settings["resource_manager"] == "local"  # Determined's `agent`: this machine's slots
    cluster = settings["pools"]
    assert sorted(cluster.pools) == ["big", "small"] and cluster.default_compute == "big"
    assert cluster.pools["big"].scheduler.preemption and cluster.pools["small"].scheduler.type == "fair_share"
    assert cluster.priority_limit == 10
    assert _settings(tmp_path, "resource_manager: local\n")["pools"].pools.keys() == {"default"}
    with pytest.raises(errors.DeterminedError) as info:
        _settings(tmp_path, "resource_manager: {type: agent, scheduler: {type: round_robin}}\n")
    assert "round_robin was removed in Determined 0.34.0" in str(info.value)


def test_submissions_and_edits_are_held_to_the_pools_and_the_priority_limit(master: InProcessMaster) -> None:
    master.master.pools = pools.parse({"priority_limit": 20}, [{"pool_name": "cpu"}, {"pool_name": "gpu"}])
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    alice = master.session("alice", "a-pw")

    def submit(session: Any, **resources: Any) -> Any:
        return session.post("/experiments", {"config": {**config(max_trials=1), "resources": resources},
                                              "model_definition": model_def()})["experiment"]["id"]

    with pytest.raises(errors.APIError) as info:
        submit(alice, resource_pool="tpu")
    assert info.value.status_code == 400 and "'tpu'" in str(info.value) and "cpu, gpu" in str(info.value)
    with pytest.raises(errors.APIError) as info:
        submit(alice, priority=5)
    assert "priority_limit" in str(info.value)
    assert admin.get("/experiments")["experiments"] == []  # nothing refused was stored
    exp = submit(alice, resource_pool="gpu", priority=20)
    submit(admin, priority=1)  # admins are not limited
    with pytest.raises(errors.APIError) as info:
        alice.patch(f"/experiments/{exp}", {"resources": {"priority": 2}})
    assert info.value.status_code == 400 and "priority_limit" in str(info.value)
    admin.patch(f"/experiments/{exp}", {"resources": {"priority": 2}})
    assert alice.get(f"/experiments/{exp}")["experiment"]["config"]["resources"]["priority"] == 2
