"""Resource pools with slots of their own on the local resource manager: an experiment runs only on its pool's
slots (real Core API trials, gated_core_trial.py); a master refuses slots that do not exist."""
import pathlib
import sys
from typing import Any, Dict

import pytest

from determined import errors
from determined.master import embedded
from determined.master.master import Master
from determined.master.rm import Slots
from determined.master.scheduling import pools
from tests.master._helpers import model_def
from tests.scheduling.test_preemption_e2e import CORE_TRIAL, TERMINAL, Api, search, trials, wait


def test_an_experiment_runs_on_its_pools_slots_only(tmp_path: pathlib.Path) -> None:
    m = embedded.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=3), preemption_timeout=30,
                       trial_command=[sys.executable, str(CORE_TRIAL)])
    m.master.pools = pools.parse({"default_compute_resource_pool": "small"},
                                 [{"pool_name": "small", "slots": [0]}, {"pool_name": "big"}])
    try:
        api = Api(m.url)
        gate = tmp_path / "gate"
        small = api.post("/experiments", {"config": search(42, [0.2, 0.7], 8, str(gate), 3),
                                          "model_definition": model_def()})["experiment"]["id"]
        cfg: Dict[str, Any] = search(42, [0.1, 0.5], 8, str(gate), 3)
        cfg["resources"]["resource_pool"] = "big"
        big = api.post("/experiments", {"config": cfg, "model_definition": model_def()})["experiment"]["id"]

        def held() -> Dict[int, list]:
            out: Dict[int, list] = {}
            [agent] = api.get("/agents")["agents"]
            for slot in api.get(f"/agents/{agent['id']}/slots")["slots"]:
                if slot["experiment_id"] is not None:
                    out.setdefault(slot["experiment_id"], []).append((slot["id"], slot["resource_pool"]))
            return out

        wait(lambda: held() == {small: [("0", "small")], big: [("1", "big"), ("2", "big")]}, 60,
             "one trial of `small` on slot 0, both of `big` on slots 1 and 2")
        listed = {p["name"]: p for p in api.get("/resource-pools")["resource_pools"]}
        assert (listed["small"]["slot_ids"], listed["small"]["slots_used"], listed["small"]["default_compute_pool"],
                listed["big"]["slot_ids"], listed["big"]["slots_used"]) == ([0], 1, True, [1, 2], 2)
        assert [j["summary"]["jobs_ahead"] for j in api.get("/job-queues", resource_pool="small")["jobs"]] == [0]
        gate.write_text("open")
        for exp in (small, big):
            wait(lambda: api.get(f"/experiments/{exp}")["experiment"]["state"] in TERMINAL, 60, f"experiment {exp}")
            assert api.get(f"/experiments/{exp}")["experiment"]["state"] == "COMPLETED"
            assert len(trials(api, exp)) == 2
    finally:
        m.stop(timeout=20)


def test_a_master_refuses_pool_slots_it_does_not_have(tmp_path: pathlib.Path) -> None:
    for raw, words in (([{"pool_name": "a", "slots": [0, 5]}], "names slot 5"),
                       ([{"pool_name": "a", "slots": [0]}, {"pool_name": "b", "slots": [0]}], "a slot belongs to one"),
                       ([{"pool_name": "a", "gpus": ["3"]}], "names GPU '3'")):
        with pytest.raises(errors.DeterminedError) as info:
            Master(tmp_path / "data", run_scheduler=True, slots=Slots(gpus=[], cpu_count=2),
                   resource_pools=pools.parse(None, raw))
        assert words in str(info.value)
