"""A process that runs the master waits for experiment state changes instead of polling (master.py)."""
import pathlib
import threading
from typing import List

from determined.master import embedded, in_process_session

from ._helpers import config, model_def


def test_waiters_wake_on_a_state_change_and_not_on_other_writes(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    setup = in_process_session(data_dir)
    setup.post("/experiments", {"config": config(max_trials=1), "model_definition": model_def(), "activate": False})
    setup.close()
    with embedded.start(data_dir) as running:
        master, http = running.master, running.session()
        seen = master.experiment_changes()
        # a write that changes no experiment's state leaves a waiter asleep until its timeout
        http.patch("/experiments/1", {"notes": "a note"})
        assert master.wait_for_experiments(seen, 0.2) == seen
        results: List[int] = []
        waiter = threading.Thread(target=lambda: results.append(master.wait_for_experiments(seen, 60)))
        waiter.start()
        assert http.get("/experiments/1")["experiment"]["state"] == "PAUSED"
        http.post("/experiments/1/activate")  # PAUSED -> ACTIVE: a change of state
        waiter.join(60)
        assert not waiter.is_alive() and results and results[0] > seen
