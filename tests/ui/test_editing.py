"""Editing from the web UI (headless Chromium): bulk actions on the experiments list, an experiment's name and labels,
a model's metadata and a version's notes, new workspaces and projects, compare trials of two experiments, search and
download a trial's logs. The UI calls the CLI's routes; the master's checks decide: another non-admin user is refused
and the page shows the master's own message. Screenshots at 1280 and 390 px go to the artifacts folder."""
import pathlib
import re
import uuid
from typing import Any, Dict, List

import pytest

from tests.master._helpers import model_def
from tests.ui.conftest import Api, TERMINAL, running_config
from tests.ui.test_browser import check_page, open_page

pytestmark = pytest.mark.slow

WAIT = {"timeout": 60000}  # the machine may be busy with other suites' trials
OTHER = "ed-alice"  # a non-admin user who owns none of what the tests change


def refusal(resp: Any) -> str:
    """The master's refusal as the UI writes it: the message, then its problems."""
    detail = resp.json()["detail"]
    if isinstance(detail, str):
        return detail
    problems = detail.get("problems") or []
    return detail["message"] + (": " + "; ".join(problems) if problems else "")


def unexpected(problems: List[str]) -> List[str]:
    """The page's problems but Chromium's own line for each refused request (the refusals the test asked for)."""
    return [p for p in problems if not re.search(r"Failed to load resource: the server responded with a status of "
                                                 r"(400|403|404|409)", p)]


@pytest.fixture(scope="module")
def edit_env(ui_master: Dict[str, Any]) -> Dict[str, Any]:
    """Four ended experiments owned by `determined` (`ed-bulk-TAG-N`), a project to move to, the other user."""
    api, url = ui_master["api"], ui_master["url"]
    tag = uuid.uuid4().hex[:6]
    admin = Api(url, "admin")
    resp = admin.client.post("/users", json={"username": OTHER, "password": ""})
    assert resp.status_code == 200 or "exists" in resp.text, resp.text
    ids = []
    for n in range(4):
        config = {**running_config(), "description": f"ed-bulk-{tag}-{n}"}
        ids.append(api.post("/experiments", {"config": config, "model_definition": model_def(), "activate": False})["experiment"]["id"])
    short = {**running_config(), "description": f"ed-short-{tag}",  # a second finished experiment to compare with
             "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 8}},
             "hyperparameters": {"global_batch_size": 1, "x": 0.7, "noise": 0.0, "sleep": 0.01, "report_every": 2}}
    short_id = api.post("/experiments", {"config": short, "model_definition": model_def()})["experiment"]["id"]
    ws = api.post("/workspaces", {"name": f"ed-ws-{tag}"})["workspace"]
    project = api.post(f"/workspaces/{ws['id']}/projects", {"name": f"ed-proj-{tag}"})["project"]
    return {"api": api, "url": url, "tag": tag, "ids": ids, "short": short_id, "project": project, "other": Api(url, OTHER), "admin": admin}


def user_context(browser: Any, user_api: Api, width: int = 1280) -> Any:
    """A browser context logged in with `user_api`'s token (as the login page would leave it)."""
    context = browser.new_context(viewport={"width": width, "height": 800})
    token = user_api.client.headers["Authorization"].split(" ", 1)[1]
    context.add_init_script(f"localStorage.setItem('det_token', {token!r});")
    return context


def shots(page: Any, artifacts: pathlib.Path, name: str) -> None:
    """Full-page screenshots at 1280 and 390 px wide; at 390 px nothing but a table may be wider than the screen."""
    page.screenshot(path=str(artifacts / f"edit-{name}-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(400)  # tables fit again after a resize
    page.screenshot(path=str(artifacts / f"edit-{name}-390.png"), full_page=True)
    wide = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.edit-panel, .bulk-bar, .bulk-results, .log-tools, .compare-pickers, .create-forms, #compare-chart'))
        .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > window.innerWidth + 1)
        .map(e => e.id || e.className)""")
    assert wide == [], f"{name}: wider than a 390 px phone: {wide}"
    page.set_viewport_size({"width": 1280, "height": 800})


def tick(page: Any, *ids: int) -> None:
    if page.is_enabled("#bulk-clear"):  # disabled while nothing is ticked
        page.click("#bulk-clear")
    for i in ids:
        page.check(f"#experiments-table input.row-select[data-id='{i}']")
    page.wait_for_function(f"() => document.getElementById('bulk-count').textContent === '{len(ids)} selected'", **WAIT)


def bulk(page: Any, button: str, summary: str) -> List[str]:
    """Click a bulk button, wait for the summary line, and answer the result lines."""
    page.click(button)
    page.wait_for_function(f"() => (document.getElementById('bulk-summary') || {{}}).textContent === {summary!r}", **WAIT)
    return page.eval_on_selector_all("#bulk-results li[data-id]", "ls => ls.map(l => l.className + ' ' + l.textContent)")


def list_page(context: Any, env: Dict[str, Any]) -> Any:
    page, problems = open_page(context, env["url"] + "/")
    page.fill("#filter", f"ed-bulk-{env['tag']}")
    page.wait_for_function("() => document.querySelectorAll('#experiments-table input.row-select').length === "
                           f"{len(env['ids'])}", **WAIT)
    return page, problems


def test_bulk_kill_label_three_archive_two_move_delete(edit_env: Dict[str, Any], shared_context: Any,
                                                       artifacts: pathlib.Path) -> None:
    api, ids = edit_env["api"], edit_env["ids"]
    page, problems = list_page(shared_context, edit_env)
    page.on("dialog", lambda d: d.accept())
    try:
        page.click("#bulk-select-shown")
        page.wait_for_function("() => document.getElementById('bulk-count').textContent === '4 selected'", **WAIT)
        lines = bulk(page, "#bulk-kill", "Kill: 4 of 4 done.")
        assert len(lines) == 4 and all(line.startswith("ok") for line in lines), lines
        for i in ids:
            api.wait(lambda i=i: api.get(f"/experiments/{i}")["experiment"]["state"] in TERMINAL, 60, f"experiment {i} ends")

        tick(page, *ids[:3])  # label three in one action
        page.fill("#bulk-label", "ed-triple, ed-more")
        lines = bulk(page, "#bulk-label-add", "Add labels: 3 of 3 done.")
        assert all("labels now" in line and "ed-triple" in line for line in lines), lines
        for i in ids[:3]:
            assert {"ed-triple", "ed-more"} <= set(api.get(f"/experiments/{i}")["experiment"]["labels"])
        assert "ed-triple" not in api.get(f"/experiments/{ids[3]}")["experiment"]["labels"]
        page.fill("#bulk-label", "ed-more")
        bulk(page, "#bulk-label-remove", "Remove labels: 3 of 3 done.")
        assert [api.get(f"/experiments/{i}")["experiment"]["labels"] for i in ids[:3]] == [["ed-triple"]] * 3

        tick(page, *ids[:2])  # archive two in one action
        lines = bulk(page, "#bulk-archive", "Archive: 2 of 2 done.")
        assert [api.get(f"/experiments/{i}")["experiment"]["archived"] for i in ids] == [True, True, False, False]

        tick(page, ids[2])  # move one to a project
        page.select_option("#bulk-project", str(edit_env["project"]["id"]))
        lines = bulk(page, "#bulk-move", "Move: 1 of 1 done.")
        assert f"ed-proj-{edit_env['tag']}" in lines[0]
        assert api.get(f"/experiments/{ids[2]}")["experiment"]["project_id"] == edit_env["project"]["id"]

        tick(page, ids[3])  # delete one (the confirm dialog is accepted)
        bulk(page, "#bulk-delete", "Delete: 1 of 1 done.")
        assert api.client.get(f"/experiments/{ids[3]}").status_code == 404
        page.wait_for_function("() => document.getElementById('bulk-count').textContent.startsWith('Tick')", **WAIT)

        # the list shows what the master now holds (it reads it again every few seconds), and keeps its ticks
        tick(page, *ids[:2])
        page.wait_for_function("""() => { const rows = Array.from(document.querySelectorAll('#experiments-table tbody tr'));
            return rows.length === 3 && rows.every(r => r.textContent.includes('CANCELED') && r.textContent.includes('ed-triple')); }""",
                               **WAIT)
        assert page.eval_on_selector_all("#experiments-table input.row-select:checked", "bs => bs.map(b => Number(b.dataset.id))") \
            == sorted(ids[:2], reverse=True)
        check_page(page, problems, "/ (bulk)", False)
        shots(page, artifacts, "bulk")
        assert problems == []
    finally:
        page.close()


def test_bulk_actions_refused_for_another_user(edit_env: Dict[str, Any], browser: Any, artifacts: pathlib.Path) -> None:
    api, other, ids = edit_env["api"], edit_env["other"], edit_env["ids"]
    expected = refusal(other.client.post(f"/experiments/{ids[0]}/unarchive", json={}))
    assert "or an admin may" in expected, expected
    context = user_context(browser, other)
    page, problems = list_page(context, {**edit_env, "ids": ids[:3]})  # the fourth is deleted
    try:
        page.wait_for_function(f"() => document.getElementById('whoami').textContent === '{OTHER}'", **WAIT)
        tick(page, *ids[:2])
        lines = bulk(page, "#bulk-unarchive", "Unarchive: 0 of 2 done, 2 refused.")
        assert lines == [f"refused Experiment {i}: refused — {expected.replace(str(ids[0]), str(i))}" for i in ids[:2]], lines
        page.fill("#bulk-label", "ed-intruder")
        tick(page, *ids[:3])
        lines = bulk(page, "#bulk-label-add", "Add labels: 0 of 3 done, 3 refused.")
        assert all(line.startswith("refused") and "or an admin may change it" in line for line in lines), lines
        assert [api.get(f"/experiments/{i}")["experiment"]["archived"] for i in ids[:2]] == [True, True]
        assert all("ed-intruder" not in api.get(f"/experiments/{i}")["experiment"]["labels"] for i in ids[:3])
        shots(page, artifacts, "bulk-refused")
        assert unexpected(problems) == []
    finally:
        context.close()


def test_rename_an_experiment_and_refused_for_another_user(edit_env: Dict[str, Any], shared_context: Any,
                                                           browser: Any, artifacts: pathlib.Path) -> None:
    api, other, exp_id = edit_env["api"], edit_env["other"], edit_env["ids"][2]
    page, problems = open_page(shared_context, f"{edit_env['url']}/experiments/{exp_id}")
    try:
        page.click("#exp-edit-panel summary")
        page.wait_for_function("() => document.getElementById('edit-name').value !== ''", **WAIT)
        page.fill("#edit-name", f"ed-renamed-{edit_env['tag']}")
        page.fill("#edit-labels", "ed-triple, ed-renamed")
        page.fill("#edit-notes", "Renamed from the UI.")
        page.click("#edit-save")
        page.wait_for_selector("#edit-message.ok", **WAIT)
        assert page.text_content("#edit-message") == "Saved name, labels, notes."
        exp = api.get(f"/experiments/{exp_id}")["experiment"]
        assert (exp["name"], exp["labels"], exp["notes"]) == (f"ed-renamed-{edit_env['tag']}", ["ed-triple", "ed-renamed"],
                                                             "Renamed from the UI.")
        expected = refusal(api.client.patch(f"/experiments/{exp_id}", json={"name": ""}))
        page.fill("#edit-name", "  ")  # the master's own check of the name decides, and the page says what it said
        page.click("#edit-save")
        page.wait_for_selector("#edit-message.refused", **WAIT)
        assert page.text_content("#edit-message") == "Refused by the master: " + expected
        assert "name" in expected
        check_page(page, unexpected(problems), f"/experiments/{exp_id} (edit)", False)
        shots(page, artifacts, "experiment")
        assert unexpected(problems) == []
    finally:
        page.close()

    expected = refusal(other.client.patch(f"/experiments/{exp_id}", json={"name": "stolen"}))
    context = user_context(browser, other)
    try:
        page, problems = open_page(context, f"{edit_env['url']}/experiments/{exp_id}")
        page.click("#exp-edit-panel summary")
        page.wait_for_function("() => document.getElementById('edit-name').value !== ''", **WAIT)
        page.fill("#edit-name", "stolen")
        page.click("#edit-save")
        page.wait_for_selector("#edit-message.refused", **WAIT)
        assert page.text_content("#edit-message") == "Refused by the master: " + expected
        assert api.get(f"/experiments/{exp_id}")["experiment"]["name"] == f"ed-renamed-{edit_env['tag']}"
        page.screenshot(path=str(artifacts / "edit-experiment-refused-1280.png"), full_page=True)
        assert unexpected(problems) == []
    finally:
        context.close()


def test_edit_model_metadata_and_version_notes_refused_for_another_user(
        ui_master: Dict[str, Any], edit_env: Dict[str, Any], shared_context: Any, browser: Any,
        artifacts: pathlib.Path) -> None:
    api, other = edit_env["api"], edit_env["other"]
    name = f"ed-model-{edit_env['tag']}"
    api.post(f"/models/{name}", {"description": "before", "metadata": {"old": 1}})
    ckpt = next(c for c in api.get(f"/experiments/{ui_master['asha']}/checkpoints")["checkpoints"] if c["state"] == "COMPLETED")
    api.post(f"/models/{name}/versions", {"checkpoint_uuid": ckpt["uuid"]})
    page, problems = open_page(shared_context, f"{edit_env['url']}/models/{name}")
    try:
        page.click("#model-edit-panel summary")
        page.wait_for_function("() => document.getElementById('model-edit-description').value === 'before'", **WAIT)
        page.fill("#model-edit-metadata", "{not json")
        page.click("#model-edit-save")
        page.wait_for_selector("#model-edit-message.refused", **WAIT)
        assert "not valid JSON" in page.text_content("#model-edit-message")
        page.fill("#model-edit-description", "after")
        page.fill("#model-edit-labels", "prod, vision")
        page.fill("#model-edit-metadata", '{"stage": "prod", "layers": 12, "tags": ["a", "b"]}')
        page.click("#model-edit-save")
        page.wait_for_selector("#model-edit-message.ok", **WAIT)
        model = api.get(f"/models/{name}")["model"]
        assert (model["description"], model["labels"], model["metadata"]) == (
            "after", ["prod", "vision"], {"stage": "prod", "layers": 12, "tags": ["a", "b"]})
        page.wait_for_selector("#version-edit-form:not(.hidden)", **WAIT)
        page.fill("#version-edit-notes", "Best of the ASHA search.")
        page.fill("#version-edit-metadata", '{"approved": true}')
        page.click("#version-edit-save")
        page.wait_for_selector("#version-edit-message.ok", **WAIT)
        version = api.get(f"/models/{name}/versions/1")["version"]
        assert (version["notes"], version["metadata"]) == ("Best of the ASHA search.", {"approved": True})
        page.wait_for_function("() => document.getElementById('model-metadata').textContent.includes('layers')", **WAIT)
        # the version's notes are shown with it, not only in the edit panel
        page.wait_for_function("() => Array.from(document.querySelectorAll('#versions-table .version-notes'))"
                               ".some(e => e.textContent === 'Best of the ASHA search.')", **WAIT)
        check_page(page, problems, f"/models/{name} (edit)", False)
        shots(page, artifacts, "model")
        assert problems == []
    finally:
        page.close()

    expected = refusal(other.client.patch(f"/models/{name}", json={"metadata": {"stolen": True}}))
    context = user_context(browser, other)
    try:
        page, problems = open_page(context, f"{edit_env['url']}/models/{name}")
        page.click("#model-edit-panel summary")
        page.wait_for_function("() => document.getElementById('model-edit-description').value === 'after'", **WAIT)
        page.fill("#model-edit-metadata", '{"stolen": true}')
        page.click("#model-edit-save")
        page.wait_for_selector("#model-edit-message.refused", **WAIT)
        assert page.text_content("#model-edit-message") == "Refused by the master: " + expected
        page.fill("#version-edit-notes", "stolen")
        page.click("#version-edit-save")
        page.wait_for_selector("#version-edit-message.refused", **WAIT)
        assert "or an admin may" in page.text_content("#version-edit-message")
        assert api.get(f"/models/{name}")["model"]["metadata"] == {"stage": "prod", "layers": 12, "tags": ["a", "b"]}
        assert api.get(f"/models/{name}/versions/1")["version"]["notes"] == "Best of the ASHA search."
        page.screenshot(path=str(artifacts / "edit-model-refused-1280.png"), full_page=True)
        assert unexpected(problems) == []
    finally:
        context.close()


def compare_traces(page: Any) -> List[Dict[str, Any]]:
    return page.evaluate("() => (document.getElementById('compare-chart').data || []).map(t => ({meta: t.meta, n: t.x.length}))")


def test_compare_trials_of_two_experiments(ui_master: Dict[str, Any], edit_env: Dict[str, Any], browser: Any,
                                           artifacts: pathlib.Path) -> None:
    """As the other user: comparing is a read, which the master allows every user (as `det trial describe`); what
    it refuses (an experiment that does not exist) is shown in its words."""
    api, asha, running = edit_env["api"], ui_master["asha"], edit_env["short"]
    api.wait(lambda: api.get(f"/experiments/{running}")["experiment"]["state"] in TERMINAL, 120, "the short experiment")
    context = user_context(browser, edit_env["other"])
    try:
        page, problems = open_page(context, f"{edit_env['url']}/compare?experiments={asha},{running}")
        page.wait_for_function("() => { const g = document.getElementById('compare-chart'); return g.data && g.data.length > 1; }", **WAIT)
        asha_trials = [t["id"] for t in api.get(f"/experiments/{asha}")["trials"]]
        traces = compare_traces(page)
        assert {t["meta"]["experiment"] for t in traces} == {asha, running}
        assert len(traces) == min(5, len(asha_trials)) + 1  # the five best of each experiment by default
        assert page.input_value("#compare-metric") == "validation:validation_loss"
        rows = page.eval_on_selector_all("#compare-trials tbody tr", "rs => rs.length")
        assert rows == len(asha_trials) + 1
        heads = page.eval_on_selector_all("#compare-trials thead th", "hs => hs.map(h => h.textContent)")
        # what differs between the trials stays in view before what does not (global_batch_size, sleep...)
        assert "Best validation" in heads and {"batch", "extra.noise", "lr", "x"} & set(heads), heads
        assert not {"global_batch_size", "sleep", "report_every"} & set(heads), heads
        assert page.eval_on_selector_all("#compare-trials span.differs", "s => s.length") >= len(traces)
        ticked = [t["meta"]["trial"] for t in traces]
        page.uncheck(f"#compare-trials input.row-select[data-id='{ticked[0]}']")
        page.wait_for_function(f"() => document.getElementById('compare-chart').data.length === {len(traces) - 1}", **WAIT)
        assert ticked[0] not in [t["meta"]["trial"] for t in compare_traces(page)]
        assert "trials=" in page.url
        page.select_option("#compare-metric", "training:loss")
        page.wait_for_function("() => document.getElementById('compare-note').textContent.startsWith('loss (training)')", **WAIT)
        assert all(t["n"] > 0 for t in compare_traces(page))
        check_page(page, problems, "/compare", True)
        shots(page, artifacts, "compare")
        assert problems == []

        page, problems = open_page(context, f"{edit_env['url']}/compare?experiments={asha},999999")
        page.wait_for_selector("#compare-message.refused", **WAIT)
        expected = refusal(edit_env["other"].client.get("/experiments/999999"))
        assert page.text_content("#compare-message") == f"Experiment 999999: {expected}"
        page.wait_for_function("() => (document.getElementById('compare-chart').data || []).length > 0", **WAIT)
    finally:
        context.close()


def test_search_and_download_a_trials_logs(ui_master: Dict[str, Any], edit_env: Dict[str, Any], shared_context: Any,
                                           artifacts: pathlib.Path) -> None:
    api = edit_env["api"]
    trial = api.get(f"/experiments/{ui_master['asha']}")["trials"][0]["id"]
    lines = [x["message"] for x in api.get(f"/trials/{trial}/logs", limit=10000)["logs"]]
    word = next(w for line in lines for w in line.split() if len(w) > 4 and w.isalpha())
    page, problems = open_page(shared_context, f"{edit_env['url']}/trials/{trial}")
    try:
        page.wait_for_function(f"() => document.querySelectorAll('#logs .log-line').length === {len(lines)}", **WAIT)
        page.fill("#log-search", word.swapcase())  # case-insensitive
        shown = page.eval_on_selector_all("#logs .log-line:not(.log-hidden)", "ls => ls.map(l => l.textContent)")
        assert shown and all(word.lower() in s.lower() for s in shown)
        assert len(shown) == sum(word.lower() in line.lower() for line in lines)
        assert page.text_content("#log-search-count") == f"{len(shown)} of {len(lines)} lines"
        with page.expect_download() as info:
            page.click("#log-download")
        download = info.value
        assert download.suggested_filename == f"trial-{trial}-logs.txt"
        assert pathlib.Path(download.path()).read_text().splitlines() == "\n".join(lines).splitlines()
        shots(page, artifacts, "trial-logs")
        page.fill("#log-search", "")
        assert page.eval_on_selector_all("#logs .log-line.log-hidden", "ls => ls.length") == 0
        assert problems == []
    finally:
        page.close()


def test_create_workspace_and_project(edit_env: Dict[str, Any], shared_context: Any, artifacts: pathlib.Path) -> None:
    api, tag = edit_env["api"], edit_env["tag"]
    page, problems = open_page(shared_context, f"{edit_env['url']}/workspaces")
    try:
        page.wait_for_selector("#new-project-workspace option", state="attached", **WAIT)
        page.fill("#new-workspace-name", f"ed-new-ws-{tag}")
        page.click("#new-workspace-submit")
        page.wait_for_selector("#new-workspace-message.ok", **WAIT)
        ws = next(w for w in api.get("/workspaces")["workspaces"] if w["name"] == f"ed-new-ws-{tag}")
        assert page.input_value("#new-project-workspace") == str(ws["id"])
        page.fill("#new-project-name", "ed-new-project")
        page.fill("#new-project-description", "made in the UI")
        page.click("#new-project-submit")
        page.wait_for_selector("#new-project-message.ok", **WAIT)
        projects = api.get(f"/workspaces/{ws['id']}/projects")["projects"]
        assert [(p["name"], p["description"]) for p in projects] == [("ed-new-project", "made in the UI")]
        expected = refusal(api.client.post("/workspaces", json={"name": f"ed-new-ws-{tag}"}))
        page.fill("#new-workspace-name", f"ed-new-ws-{tag}")  # taken: the master refuses
        page.click("#new-workspace-submit")
        page.wait_for_selector("#new-workspace-message.refused", **WAIT)
        assert page.text_content("#new-workspace-message") == "Refused by the master: " + expected
        page.wait_for_selector(f"section[data-workspace='{ws['id']}'] tbody tr a", **WAIT)
        check_page(page, unexpected(problems), "/workspaces (create)", False)
        shots(page, artifacts, "workspaces")
        assert unexpected(problems) == []
    finally:
        page.close()
