"""Workspaces in the web UI (headless Chromium): the workspaces page lists each workspace with its projects, a
project links to the experiments page filtered to it, and the models page filters by workspace."""
from typing import Any, Dict, List

import pytest

from tests.master._helpers import model_def
from tests.ui.conftest import running_config
from tests.ui.test_browser import check_page, open_page

pytestmark = pytest.mark.slow


WAIT = {"timeout": 60000}  # the machine may be busy with other suites' trials


def _rows(page: Any, table: str) -> List[str]:
    return page.eval_on_selector_all(f"#{table} tbody tr", "rows => rows.map(r => r.textContent)")


def test_workspaces_page_and_the_project_and_workspace_filters(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, url = ui_master["api"], ui_master["url"]
    ws = api.post("/workspaces", {"name": "ui-team"})["workspace"]
    project = api.post(f"/workspaces/{ws['id']}/projects", {"name": "ui-project", "description": "ui"})["project"]
    config = {**running_config(), "description": "in ui-project", "workspace": "ui-team", "project": "ui-project"}
    exp = api.post("/experiments", {"config": config, "model_definition": model_def(), "activate": False})["experiment"]
    assert exp["project_id"] == project["id"]
    # one of its own in Uncategorized: what the page shows must not depend on the tests this worker ran before
    other = api.post("/experiments", {"config": {**running_config(), "description": "uncategorized"},
                                      "model_definition": model_def(), "activate": False})["experiment"]
    assert other["project_id"] == 1
    api.post("/models/ui-team-model", {"description": "in ui-team", "workspace_id": ws["id"]})

    page, problems = open_page(shared_context, url + "/workspaces")
    try:
        link = f"section[data-workspace='{ws['id']}'] tbody tr a"
        page.wait_for_selector(link, **WAIT)
        assert page.locator(link).text_content() == "ui-project"
        check_page(page, problems, "/workspaces", False)
        page.locator(link).click()  # to the experiments page, filtered to the project (a locator: the page re-renders)
        page.wait_for_url(f"**/?project={project['id']}", **WAIT)
        page.wait_for_function("() => document.getElementById('project-filter').value !== ''", **WAIT)
        # one row, ours (not the "No experiments yet" row the table shows before its data arrives)
        page.wait_for_function("() => { const r = document.querySelectorAll('#experiments-table tbody tr'); "
                               "return r.length === 1 && r[0].textContent.includes('in ui-project'); }", **WAIT)
        assert f"{exp['id']}" in _rows(page, "experiments-table")[0]
        assert page.input_value("#project-filter") == str(project["id"])
        page.select_option("#project-filter", "")  # all projects: the others come back
        page.wait_for_function("() => Array.from(document.querySelectorAll('#experiments-table tbody tr'))"
                               ".filter(r => /in ui-project|uncategorized/.test(r.textContent)).length === 2", **WAIT)
        assert "project=" not in page.url
        page.select_option("#project-filter", "1")  # Uncategorized: the other one, not ours
        page.wait_for_function(
            "() => { const r = Array.from(document.querySelectorAll('#experiments-table tbody tr')); "
            "return r.some(x => x.textContent.includes('uncategorized')) "
            "&& r.every(x => !x.textContent.includes('in ui-project')); }", **WAIT)
        assert any("uncategorized" in r for r in _rows(page, "experiments-table"))
        assert problems == []
    finally:
        page.close()

    page, problems = open_page(shared_context, url + f"/models?workspace={ws['id']}")
    try:
        page.wait_for_function(f"() => document.getElementById('workspace-filter').value === '{ws['id']}'", **WAIT)
        page.wait_for_function("() => { const r = document.querySelectorAll('#models-table tbody tr'); "
                               "return r.length === 1 && r[0].textContent.includes('ui-team-model'); }", **WAIT)
        assert "ui-team-model" in _rows(page, "models-table")[0]
        assert problems == []
    finally:
        page.close()
