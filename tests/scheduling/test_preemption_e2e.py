"""Preemption on the local resource manager, with real Core API trials (gated_core_trial.py): alice's priority-60
search fills both slots; bob submits priority 10 (priority scheduler with preemption), or just arrives (fair share);
one of alice's trials checkpoints and gives its slot up, bob's trial runs, alice's resumes from that checkpoint, and
her metrics equal an uninterrupted run's."""
import pathlib
import sys
import time
from typing import Any, Dict, Iterator, List, Tuple

import httpx
import pytest

from determined.master import embedded
from determined.master.rm import Slots
from determined.master.scheduling import pools
from tests.master._helpers import model_def

CORE_TRIAL = pathlib.Path(__file__).resolve().parent / "gated_core_trial.py"
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


class Api:
    def __init__(self, url: str, username: str = "determined") -> None:
        self.client = httpx.Client(base_url=url + "/api/v1", timeout=30)
        resp = self.client.post("/auth/login", json={"username": username, "password": ""})
        assert resp.status_code == 200, resp.text
        self.client.headers["Authorization"] = f"Bearer {resp.json()['token']}"

    def get(self, path: str, **params: Any) -> Any:
        resp = self.client.get(path, params=params)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def post(self, path: str, body: Any) -> Any:
        resp = self.client.post(path, json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def search(priority: int, xs: List[float], batches: int, gate: str = "", gate_at: int = 0) -> Dict[str, Any]:
    return {"entrypoint": "model:T", "resources": {"priority": priority},
            "searcher": {"name": "grid", "metric": "validation_loss", "max_length": {"batches": batches}},
            "hyperparameters": {"global_batch_size": 1, "x": {"type": "categorical", "vals": xs}, "gate": gate,
                                "gate_at": gate_at},
            "max_restarts": 0}


@pytest.fixture(params=["priority", "fair_share"])
def master(tmp_path: pathlib.Path, request: Any) -> Iterator[Any]:
    m = embedded.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=2), preemption_timeout=30,
                       trial_command=[sys.executable, str(CORE_TRIAL)])
    m.master.pools = pools.parse({"scheduler": {"type": request.param, "preemption": True}} if request.param ==
                                 "priority" else {"scheduler": {"type": request.param}})
    try:
        yield m
    finally:
        m.stop(timeout=20)


def trials(api: Api, exp_id: int) -> List[Dict[str, Any]]:
    return list(api.get(f"/experiments/{exp_id}")["trials"])


def metrics_by_x(api: Api, exp_id: int) -> Dict[float, List[Tuple[int, float]]]:
    out = {}
    for trial in trials(api, exp_id):
        records = api.get(f"/trials/{trial['id']}/metrics", group="training")["metrics"]
        out[float(trial["hparams"]["x"])] = [(r["steps_completed"], r["metrics"]["loss"]) for r in records]
    return out


def test_a_preempted_trial_gives_its_slot_up_and_resumes_exactly(master: Any, tmp_path: pathlib.Path) -> None:
    """priority: bob's priority 10 preempts alice's priority 60; fair_share: bob's equal weight takes one of the two
    slots alice holds."""
    api = Api(master.url)
    fair = api.get("/resource-pools")["resource_pools"][0]["scheduler_type"] == "SCHEDULER_TYPE_FAIR_SHARE"
    gate = tmp_path / "gate"  # alice's trials wait at batch 5 until it exists
    alice = api.post("/experiments", {"config": search(60, [0.2, 0.7], 12, str(gate), 5),
                                      "model_definition": model_def()})["experiment"]["id"]
    wait(lambda: {len(v) for v in metrics_by_x(api, alice).values()} == {5}, 60, "alice's two trials at the gate")
    queue = api.get("/job-queues")["jobs"]
    assert [(j["entity_id"], j["summary"]["state"], j["allocated_slots"]) for j in queue] == [(str(alice),
                                                                                             "STATE_SCHEDULED", 2)]
    assert queue[0]["is_preemptible"] is True and queue[0]["priority"] == 60
    pool = api.get("/resource-pools")["resource_pools"][0]
    assert (pool["slots_available"], pool["slots_used"], pool["stats"]) == (2, 2, {"queued_count": 0,
                                                                                 "scheduled_count": 1})
    [agent] = api.get("/agents")["agents"]  # the local resource manager: one agent, this machine
    assert (agent["slots"], agent["containers"], agent["resource_pools"]) == (2, 2, ["default"])
    slots = api.get(f"/agents/{agent['id']}/slots")["slots"]
    assert [(s["id"], s["experiment_id"], s["device_type"]) for s in slots] == [("0", alice, "cpu"), ("1", alice, "cpu")]

    bob = api.post("/experiments", {"config": search(10, [0.4], 6), "model_definition": model_def()})["experiment"]["id"]
    wait(lambda: api.get(f"/experiments/{bob}")["experiment"]["state"] in TERMINAL, 60, "bob's experiment to end")
    assert api.get(f"/experiments/{bob}")["experiment"]["state"] == "COMPLETED"
    # bob's trial ran while alice's waited at the gate: one of hers gave its slot up, the other kept running.
    assert api.get(f"/experiments/{alice}")["experiment"]["state"] == "ACTIVE"
    gate.write_text("open")
    wait(lambda: api.get(f"/experiments/{alice}")["experiment"]["state"] in TERMINAL, 60, "alice's search to end")
    assert api.get(f"/experiments/{alice}")["experiment"]["state"] == "COMPLETED"
    done = trials(api, alice)
    logs = {t["id"]: " ".join(line["message"] for line in api.get(f"/trials/{t['id']}/logs", limit=10000)["logs"])
            for t in done}
    why = "more than its fair share" if fair else "preempted by a job of higher priority"
    preempted = [i for i, text in logs.items() if why in text]
    # Exactly one trial gave its slot up (bob needed one): the newest of the lowest priority; it ran again from the
    # checkpoint it wrote when preempted, at batch 5.
    assert preempted == [max(logs)], logs
    assert "run 2 starts from checkpoint" in logs[max(logs)] and "at batch 5" in logs[max(logs)]
    assert "run 2 starts" not in logs[min(logs)]

    # The same search, uninterrupted (its gate is open): the same metrics, batch by batch.
    again = api.post("/experiments", {"config": search(60, [0.2, 0.7], 12, str(gate), 5),
                                      "model_definition": model_def()})["experiment"]["id"]
    wait(lambda: api.get(f"/experiments/{again}")["experiment"]["state"] in TERMINAL, 60, "the uninterrupted search")
    assert metrics_by_x(api, alice) == metrics_by_x(api, again)
    assert [s for s, _ in metrics_by_x(api, again)[0.7]] == list(range(1, 13))
