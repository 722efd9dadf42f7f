"""The Tasks page in Chromium at a phone's width (360 px): alice's running command is listed with Logs and Kill,
the page is no wider than the window, and Kill ends the task."""
import pathlib
import time
from typing import Any, Callable

from determined.common.api import Session
from determined.master import embedded
from determined.master.rm import Slots


def wait_for(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_tasks_page_lists_and_kills_at_360_px(tmp_path: pathlib.Path, browser: Any) -> None:
    """The suite's one Chromium (tests/ui/conftest.py): a second Playwright in the same worker would be refused."""
    running = embedded.start(tmp_path / "data", slots=Slots(gpus=[], cpu_count=1))
    try:
        api = Session(running.url, user="determined")
        api.login("determined", "", make_default=False)
        task = api.post("/commands", {"config": {"entrypoint": ["sleep 60"], "resources": {"slots": 0},
                                                 "description": "a long preprocessing step"}})["task"]
        wait_for(lambda: api.get(f"/tasks/{task['id']}")["task"]["state"] == "STATE_RUNNING")
        context = browser.new_context(viewport={"width": 360, "height": 740})
        try:
            page = context.new_page()
            errors: list = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(running.url + "/tasks")
            row = page.locator("#tasks tbody tr", has_text="a long preprocessing step")
            row.wait_for(timeout=30000)
            assert "RUNNING" in row.inner_text()
            width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"
            row.get_by_role("button", name="Logs").click()
            page.locator("#task-logs-text", has_text="started (pid").wait_for(timeout=30000)
            row.get_by_role("button", name="Kill").click()
            wait_for(lambda: api.get(f"/tasks/{task['id']}")["task"]["state"] == "STATE_TERMINATED")
            assert errors == []
        finally:
            context.close()
    finally:
        running.stop(timeout=10)
