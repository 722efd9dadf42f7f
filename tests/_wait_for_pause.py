"""Shipped beside the training scripts of the 0.38 callback tests (as `wait_for_pause.py` in the model
definition): holds a training run at a known point until the platform asks the trial to stop, so that a test's
pause lands there."""
import pathlib
import time

TIMEOUT_S = 300  # the test pauses within its own timeouts; past this the run goes on unpaused


def wait_for_pause(core_context: object, wait_dir: str) -> None:
    """Write `<wait_dir>/ready` (the test pauses the experiment when it sees it), then wait for the request."""
    pathlib.Path(wait_dir, "ready").touch()
    deadline = time.monotonic() + TIMEOUT_S
    while not core_context.preempt.should_preempt(auto_ack=False) and time.monotonic() < deadline:  # type: ignore
        time.sleep(0.05)
