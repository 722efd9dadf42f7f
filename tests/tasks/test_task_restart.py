"""A master that stops ends its tasks and says so; one that died leaves them recorded as running, and the next
master records why they ended (their processes died with it) and frees nothing twice."""
import pathlib
import time
from typing import Any, Callable

from determined.common.api import Session
from determined.master import embedded
from determined.master.db.models import Task
from determined.master.rm import Slots
from determined.master.tasks import states


def wait_for(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_tasks_end_with_the_master_and_a_restart_says_why(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    running = embedded.start(data, slots=Slots(gpus=[], cpu_count=1))
    try:
        admin = Session(running.url, user="admin")
        admin.login("admin", "", make_default=False)
        task = admin.post("/commands", {"config": {"entrypoint": ["sleep 60"]}})["task"]
        wait_for(lambda: admin.get(f"/tasks/{task['id']}")["task"]["state"] == states.RUNNING)
        assert running.master.rm.free_slots() == 0
        with running.master.write() as s:  # as a master that was SIGKILLed left it: recorded as running
            s.add(Task(id="dead-task", task_type=states.COMMAND, state=states.RUNNING, description="left", owner="admin",
                       config={"entrypoint": ["true"]}, slots=0, resource_pool="default", kill_requested=False,
                       pid=999999))
    finally:
        running.stop(timeout=10)
    restarted = embedded.start(data, slots=Slots(gpus=[], cpu_count=1))
    try:
        admin = Session(restarted.url, user="admin")
        admin.login("admin", "", make_default=False)
        stopped = admin.get(f"/tasks/{task['id']}")["task"]
        assert stopped["state"] == states.TERMINATED and "the master stopped" in stopped["exitStatus"]
        left = admin.get("/tasks/dead-task")["task"]
        assert left["state"] == states.TERMINATED and "its process ended with it" in left["exitStatus"]
        assert restarted.master.rm.free_slots() == 1  # nothing is counted as held
    finally:
        restarted.stop(timeout=10)
