"""Issue 31's notebook in a real browser: the UI's user opens their JupyterLab from the Tasks page (the master's
URL, a one-time address traded for the task's cookie), creates a notebook in JupyterLab's own launcher and runs a
cell that lists their experiments with `determined.experimental.client`: the kernel acts as that user with the
task's own token, and the cell prints the same experiments the API gives them. (Another user's 403 on the proxy and
on the kernel's WebSocket: tests/tasks/test_tasks.py::test_notebook_through_the_proxy_owner_only_and_killed_when_idle.)"""
import pathlib
import re
from typing import Any, Dict

import pytest


def test_the_owner_opens_jupyterlab_from_the_tasks_page_and_a_cell_lists_their_experiments(
        ui_master: Dict[str, Any], browser: Any, artifacts: pathlib.Path) -> None:
    pytest.importorskip("jupyterlab")
    api, url = ui_master["api"], ui_master["url"]
    nb = api.post("/notebooks", {"config": {"resources": {"slots": 0}, "description": "notebook in chromium"}})["task"]
    try:
        api.wait(lambda: api.get(f"/tasks/{nb['id']}")["task"]["state"] == "STATE_RUNNING"
                 and api.get(f"/tasks/{nb['id']}")["task"]["serviceAddress"], 120, "JupyterLab to answer")
        mine = sorted(e["id"] for e in api.get("/experiments", limit=1000)["experiments"])
        assert mine, "the session's master has experiments of the UI's user"
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            page.goto(url + "/tasks")
            row = page.locator("#tasks tbody tr", has_text="notebook in chromium")
            row.wait_for(timeout=30000)
            with context.expect_page() as opened:
                row.get_by_role("button", name="Open").click()
            lab = opened.value
            lab.wait_for_url(re.compile(rf".*/proxy/{nb['id']}/lab.*"), timeout=60000)
            assert lab.url.startswith(url)  # the master's URL, not the task's port
            lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=60000)
            cell = lab.locator(".jp-Notebook .jp-Cell .cm-content").first
            cell.wait_for(timeout=60000)
            # the kernel started and idle (the status bar says so once it answered), then the cell's text set whole
            lab.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120000)
            cell.fill("from determined.experimental import client\n"
                      "print('experiments', sorted(e.id for e in client.list_experiments()))")
            cell.press("Shift+Enter")
            output = lab.locator(".jp-OutputArea-output", has_text="experiments")
            output.first.wait_for(timeout=120000)
            lab.screenshot(path=str(artifacts / "notebook-in-chromium.png"))
            assert output.first.inner_text().strip() == f"experiments {mine}"
        finally:
            context.close()
    finally:
        api.post(f"/tasks/{nb['id']}/kill")
