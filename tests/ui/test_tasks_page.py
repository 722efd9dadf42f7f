"""The Tasks page in Chromium at a phone's width (360 px): a running command is listed with Logs and Kill, the page
is no wider than the window, and Kill ends the task; a running shell's Terminal opens its login shell in the page,
which runs what is typed, and shows why it ended; another user's browser is refused. One master for the module."""
import pathlib
import socket
import time
from typing import Any, Callable, Dict, Iterator

import pytest

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


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    running = embedded.start(tmp_path_factory.mktemp("tasks-page") / "data", slots=Slots(gpus=[], cpu_count=1))
    try:
        api = Session(running.url, user="determined")
        api.login("determined", "", make_default=False)
        admin = Session(running.url, user="admin")
        admin.login("admin", "", make_default=False)
        admin.post("/users", {"username": "bob", "password": "pw-bob", "admin": False})
        bob = Session(running.url, user="bob")
        bob.login("bob", "pw-bob", make_default=False)
        yield {"running": running, "api": api, "bob": bob}
    finally:
        running.stop(timeout=10)


def test_tasks_page_lists_and_kills_at_360_px(master: Dict[str, Any], browser: Any) -> None:
    """The suite's one Chromium (tests/ui/conftest.py): a second Playwright in the same worker would be refused."""
    running, api = master["running"], master["api"]
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


@pytest.mark.parametrize("width", [360, 1280])
def test_a_shells_terminal_opens_from_the_tasks_page_and_runs_what_is_typed(
        master: Dict[str, Any], browser: Any, artifacts: pathlib.Path, width: int) -> None:
    pytest.importorskip("asyncssh")
    running, api, bob = master["running"], master["api"], master["bob"]
    shell = api.post("/shells", {"config": {"resources": {"slots": 0}, "description": f"shell at {width}"}})["task"]
    wait_for(lambda: api.get(f"/tasks/{shell['id']}")["task"]["state"] == "STATE_RUNNING")
    context = browser.new_context(viewport={"width": width, "height": 740})
    try:
        page = context.new_page()
        errors: list = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(running.url + "/tasks")
        row = page.locator("#tasks tbody tr", has_text=f"shell at {width}")
        row.wait_for(timeout=30000)
        row.get_by_role("button", name="Terminal").click()
        page.wait_for_url(f"**/tasks/{shell['id']}/terminal")
        page.locator("#terminal-state", has_text="connected as determined").wait_for(timeout=30000)
        screen = page.locator("#terminal")
        screen.click()
        page.keyboard.type("echo from-the-browser-$((6*7)); hostname")
        page.keyboard.press("Enter")
        screen.filter(has_text="from-the-browser-42").wait_for(timeout=30000)
        screen.filter(has_text=socket.gethostname()).wait_for(timeout=30000)
        size = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert size[0] <= size[1], f"the page is {size[0]} px wide in a {size[1]} px window"
        page.screenshot(path=str(artifacts / f"terminal-{width}.png"))
        page.keyboard.type("exit 7")
        page.keyboard.press("Enter")
        page.locator("#terminal-state", has_text="exit status 7").wait_for(timeout=30000)
        assert page.locator("#terminal-reconnect").is_visible()
        assert errors == []
        # bob's browser: refused, with the reason, and the shell is untouched
        other = context.new_page()
        other.add_init_script(f"localStorage.setItem('det_token', {bob.token!r})")
        other.goto(f"{running.url}/tasks/{shell['id']}/terminal")
        other.locator("#terminal-state", has_text="only its owner and admins").wait_for(timeout=30000)
    finally:
        context.close()
        api.post(f"/tasks/{shell['id']}/kill")
