"""The web UI in headless Chromium at 1280x800 against a master holding a finished ASHA experiment and a running
single-trial one: every page loads, fits the window and sends nothing off the machine; progress moves; trial
states say why; learning curves overlay training and validation and smooth; compare overlays the ticked trials;
parallel coordinates use log and categorical axes; config and code show; checkpoint buttons work."""
import io
import json
import math
import pathlib
import re
import tarfile
import urllib.parse
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from tests.ui.conftest import Api

pytestmark = pytest.mark.slow

NO_OVERFLOW = """() => {
  const doc = document.documentElement;
  const tables = Array.from(document.querySelectorAll('.table-scroll')).filter(w => w.offsetParent !== null)
    .filter(w => w.scrollWidth > w.clientWidth + 1).map(w => w.parentElement.id || w.className);
  return {page: doc.scrollWidth - window.innerWidth, tables};
}"""


def open_page(context: Any, url: str) -> Tuple[Any, List[str]]:
    """A page of `context` at `url`, collecting console errors and page errors."""
    page = context.new_page()
    problems: List[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.goto(url)
    return page, problems


def plot_ready(page: Any, div_id: str) -> None:
    page.wait_for_function(f"() => {{ const g = document.getElementById('{div_id}'); return g && g.data && g.data.length > 0; }}",
                           timeout=20000)


def trial_ids(api: Any, experiment_id: int) -> List[int]:
    return [t["id"] for t in api.get(f"/experiments/{experiment_id}")["trials"]]


def traces(page: Any, div_id: str) -> List[Dict[str, Any]]:
    return page.evaluate(f"""() => document.getElementById('{div_id}').data.map(t => ({{
        meta: t.meta, name: t.name, x: Array.from(t.x), y: Array.from(t.y),
        raw: t.customdata ? Array.from(t.customdata) : null, width: t.line && t.line.width}}))""")


class OpenPage:
    """A page kept open for several tests (the experiment pages are the heavy ones), with its problems."""

    def __init__(self, context: Any, url: str, charts: List[str]) -> None:
        self.page, self.problems = open_page(context, url)
        self.page.wait_for_selector("#trials-table tbody tr", timeout=60000)
        for chart in charts:
            plot_ready(self.page, chart)


@pytest.fixture(scope="module")
def request_log(shared_context: Any) -> Iterator[List[str]]:
    """Every URL the browser requests while this module's pages are used."""
    requests: List[str] = []

    def on_request(request: Any) -> None:
        requests.append(request.url)

    shared_context.on("request", on_request)
    try:
        yield requests
    finally:
        shared_context.remove_listener("request", on_request)


def leaving(requests: List[str]) -> List[str]:
    """The requests that go anywhere but this machine's master (data: and blob: URLs stay in the browser)."""
    return [u for u in requests if urllib.parse.urlsplit(u).scheme in ("http", "https", "ws", "wss")
            and urllib.parse.urlsplit(u).hostname != "127.0.0.1"]


@pytest.fixture(scope="module")
def asha_page(ui_master: Dict[str, Any], shared_context: Any, request_log: List[str]) -> Iterator[OpenPage]:
    """The finished ASHA experiment's page, opened once for the tests that read it."""
    opened = OpenPage(shared_context, f"{ui_master['url']}/experiments/{ui_master['asha']}",
                      ["learning-curves", "hp-parcoords", "searcher-progress", "hp-importance"])
    try:
        yield opened
    finally:
        opened.page.close()


@pytest.fixture(scope="module")
def running_page(ui_master: Dict[str, Any], shared_context: Any, request_log: List[str]) -> Iterator[OpenPage]:
    """The running single-trial experiment's page, opened once."""
    opened = OpenPage(shared_context, f"{ui_master['url']}/experiments/{ui_master['running']}", ["learning-curves"])
    try:
        yield opened
    finally:
        opened.page.close()


def check_page(page: Any, problems: List[str], path: str, charts: bool) -> None:
    assert problems == [], f"{path}: {problems}"
    overflow = page.evaluate(NO_OVERFLOW)
    assert overflow == {"page": 0, "tables": []}, f"{path} is wider than 1280 px: {overflow}"
    if charts:  # nothing on a chart offers to send data anywhere (plotly's "share to cloud" button is off)
        modebar = page.evaluate("() => Array.from(document.querySelectorAll('.modebar-btn')).map(b => b.getAttribute('data-title') || '')")
        assert modebar and not [t for t in modebar if re.search(r"cloud|share|chart studio|edit", t, re.I)]
        config = page.evaluate("() => document.querySelector('.js-plotly-plot')._context")
        assert config["showSendToCloud"] is False and config["plotlyServerURL"] == ""
        assert config["displaylogo"] is False and not config.get("showLink")
        assert page.locator("a.js-plot-link-container").count() == 0


def test_every_page_loads_fits_and_sends_nothing_out(ui_master: Dict[str, Any], shared_context: Any,
                                                     asha_page: OpenPage, running_page: OpenPage,
                                                     request_log: List[str], artifacts: pathlib.Path) -> None:
    api, url, asha, running = ui_master["api"], ui_master["url"], ui_master["asha"], ui_master["running"]
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    ckpt = api.get(f"/trials/{best}/checkpoints", states="COMPLETED")["checkpoints"][-1]
    api.post("/models/ui-model", {"description": "the best of the ASHA search", "metadata": {"team": "ui"}})
    api.post("/models/ui-model/versions", {"checkpoint_uuid": ckpt["uuid"]})
    running_trial = trial_ids(api, running)[0]
    for name, opened in (("experiment-asha", asha_page), ("experiment-running", running_page)):
        opened.page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
        check_page(opened.page, opened.problems, name, True)
    pages = [
        ("experiments", "/", "#experiments-table tbody tr a"),
        ("trial-asha", f"/trials/{best}", "#trial-checkpoints tbody tr"),
        ("trial-running", f"/trials/{running_trial}", "#trial-hparams tr"),
        ("models", "/models", "#models-table tbody tr a"),
        ("model", "/models/ui-model", "#versions-table tbody tr"),
        ("cluster", "/cluster", "#allocations-table tbody tr a"),
        ("login", "/login", "#login-form"),
    ]
    for name, path, marker in pages:
        page, problems = open_page(shared_context, url + path)
        try:
            page.wait_for_selector(marker, timeout=30000)
            if name.startswith("trial"):
                page.wait_for_selector("#trial-charts .metric-chart .main-svg", timeout=30000)
            page.wait_for_timeout(200)
            page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
            check_page(page, problems, path, name.startswith("trial"))
        finally:
            page.close()
    assert request_log and leaving(request_log) == []


def test_the_trial_page_charts_another_metric_group(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    latency = [m["metrics"]["latency_ms"] for m in api.get(f"/trials/{best}/metrics", group="inference")["metrics"]]
    page, problems = open_page(shared_context, f"{ui_master['url']}/trials/{best}")
    try:
        page.wait_for_selector("#trial-charts .metric-chart .main-svg", timeout=20000)
        page.select_option("#trial-group", "inference")
        page.wait_for_selector("#trial-charts .metric-chart[data-metric='latency_ms'] .main-svg", timeout=20000)
        plotted = page.evaluate("() => document.querySelector(\"[data-metric='latency_ms']\").data[0].y")
        assert plotted == latency and latency
        assert problems == []
    finally:
        page.close()


def test_progress_moves_on_a_running_experiment(running_page: OpenPage) -> None:
    page, problems = running_page.page, running_page.problems
    page.wait_for_selector("#exp-progress .progress")
    read = "() => Number(document.querySelector('#exp-progress .progress').dataset.progress)"
    page.wait_for_function(f"() => ({read})() > 0", timeout=30000)
    first = page.evaluate(read)
    page.wait_for_function(f"() => ({read})() > {first}", timeout=30000)
    assert page.inner_text("#exp-elapsed").startswith("Elapsed ")
    page.wait_for_selector("#exp-eta", timeout=20000)
    assert re.match(r"ETA \d", page.inner_text("#exp-eta"))
    assert problems == []


def test_trial_states_say_why_with_true_times(ui_master: Dict[str, Any], shared_context: Any, asha_page: OpenPage,
                                              artifacts: pathlib.Path) -> None:
    api, asha, running = ui_master["api"], ui_master["asha"], ui_master["running"]
    trials = api.get(f"/experiments/{asha}")["trials"]
    stopped = [t for t in trials if t["status"] == "STOPPED"]
    assert stopped and all(t["status_reason"].startswith("stopped by the searcher at rung") for t in stopped)
    page = asha_page.page
    badges = page.evaluate("""() => Array.from(document.querySelectorAll('#trials-table tbody tr'))
        .map(r => [r.querySelector('td:nth-child(2) a').textContent.split(' ')[0],
                   r.querySelector('td:nth-child(3) .state').textContent,
                   r.querySelector('td:nth-child(3) .state').title])""")
    shown = {int(tid): (state, title) for tid, state, title in badges}
    for t in trials:
        assert shown[t["id"]] == (t["status"], t["status_reason"])
    page, problems = open_page(shared_context, f"{ui_master['url']}/trials/{stopped[0]['id']}")
    try:
        page.wait_for_selector("#trial-ended")
        assert page.inner_text("#trial-reason") == f"STOPPED: {stopped[0]['status_reason']}"
        assert page.inner_text("#trial-state") == "STOPPED"
        page.wait_for_selector("#logs .log-master")
        story = page.inner_text("#logs")
        assert "[master] validation at batch" in story and "[master] trial ended: STOPPED: stopped by the searcher" in story
        page.screenshot(path=str(artifacts / "trial-stopped.png"), full_page=True)
        assert problems == []
    finally:
        page.close()
    running_trial = api.wait(lambda: next((t for t in api.get(f"/experiments/{running}")["trials"]
                                           if t["status"] == "RUNNING"), None), 60, "the running trial")
    assert running_trial["status_reason"] == "training to 100000 batches"
    assert running_trial["start_time"] and running_trial["end_time"] is None


def test_learning_curves_overlay_training_and_validation_and_smooth(ui_master: Dict[str, Any],
                                                                    asha_page: OpenPage) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    page, problems = asha_page.page, asha_page.problems
    try:
        assert page.input_value("#curve-controls .metric-picker") == "loss"  # validation_loss and loss: one quantity
        page.fill("#curve-controls .smoothing", "0")
        page.dispatch_event("#curve-controls .smoothing", "input")
        page.wait_for_function("() => !document.getElementById('learning-curves').data.some(t => t.name.endsWith('(raw)'))")
        plain = [t for t in traces(page, "learning-curves")]
        names = {t["name"] for t in plain}
        for tid in trial_ids(api, asha):
            described = api.get(f"/trials/{tid}")
            assert f"Trial {tid} loss" in names and f"Trial {tid} validation_loss" in names
            training = next(t for t in plain if t["name"] == f"Trial {tid} loss")
            assert training["y"] == [m["metrics"]["loss"] for m in described["training_metrics"]]
        best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
        widths = {t["meta"]: t["width"] for t in plain}
        assert widths[best] > min(widths.values())  # the best trial stands out
        # smoothing changes the plotted data (a debiased moving average), and keeps the raw data faint beside it
        page.fill("#curve-controls .smoothing", "0.9")
        page.dispatch_event("#curve-controls .smoothing", "input")
        page.wait_for_function("() => document.getElementById('learning-curves').data.some(t => t.name.endsWith('(raw)'))")
        smoothed = {t["name"]: t for t in traces(page, "learning-curves")}
        line = smoothed[f"Trial {best} loss"]
        assert line["raw"] == next(t for t in plain if t["name"] == f"Trial {best} loss")["y"]
        assert line["y"] != line["raw"] and line["y"][0] == pytest.approx(line["raw"][0])
        expected, last = [], 0.0
        for i, v in enumerate(line["raw"]):  # TensorBoard's formula
            last = last * 0.9 + 0.1 * v
            expected.append(last / (1 - 0.9 ** (i + 1)))
        assert line["y"] == pytest.approx(expected)
        # log y, x by time, and the training group off
        page.check("#curve-controls .log-y")
        page.wait_for_function("() => document.getElementById('learning-curves').layout.yaxis.type === 'log'")
        page.select_option("#curve-controls .x-axis", "time")
        page.wait_for_function("() => /seconds/.test(document.getElementById('learning-curves').layout.xaxis.title.text)")
        timed = {t["name"]: t for t in traces(page, "learning-curves")}
        assert timed[f"Trial {best} loss"]["x"] != line["x"] and min(timed[f"Trial {best} loss"]["x"]) >= 0
        page.uncheck("#curve-controls input.group[value='training']")
        page.wait_for_function("() => document.getElementById('learning-curves').data.every(t => t.name.includes('validation_loss'))")
        assert problems == []
    finally:  # the controls as the other tests expect them
        page.check("#curve-controls input.group[value='training']")
        page.uncheck("#curve-controls .log-y")
        page.select_option("#curve-controls .x-axis", "batches")


def test_compare_overlays_exactly_the_ticked_trials(ui_master: Dict[str, Any], asha_page: OpenPage,
                                                    artifacts: pathlib.Path) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    ids = trial_ids(api, asha)
    picked = [ids[0], ids[-1]]
    page, problems = asha_page.page, asha_page.problems
    assert page.is_hidden("#compare-card")
    for tid in picked:
        page.check(f"#trials-table input.row-select[data-id='{tid}']")
    plot_ready(page, "compare-curves")
    page.wait_for_function("() => new Set(document.getElementById('compare-curves').data.map(t => t.meta)).size === 2")
    assert {t["meta"] for t in traces(page, "compare-curves")} == set(picked)
    heads = page.evaluate("() => Array.from(document.querySelectorAll('#compare-table th[data-trial]')).map(h => Number(h.dataset.trial))")
    assert heads == picked
    rows = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('#compare-table tbody tr'))
        .map(r => [r.querySelector('th').textContent, Array.from(r.querySelectorAll('td')).map(d => d.textContent)]))""")
    for i, tid in enumerate(picked):
        hp = api.get(f"/trials/{tid}")["trial"]["hparams"]
        assert rows["x"][i] == page.evaluate(f"() => det.fmtNum({hp['x']})")
    page.screenshot(path=str(artifacts / "experiment-compare.png"), full_page=True)
    page.uncheck(f"#trials-table input.row-select[data-id='{picked[0]}']")
    page.wait_for_function(f"() => document.getElementById('compare-curves').data.every(t => t.meta === {picked[1]})")
    page.click("#compare-clear")
    page.wait_for_selector("#compare-card", state="hidden")
    assert page.locator("#trials-table input.row-select:checked").count() == 0
    assert problems == []


def test_parallel_coordinates_use_log_and_categorical_axes(ui_master: Dict[str, Any], asha_page: OpenPage,
                                                           running_page: OpenPage) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    trials = api.get(f"/experiments/{asha}")["trials"]
    page, problems = asha_page.page, asha_page.problems
    dims = page.evaluate("""() => document.getElementById('hp-parcoords').data[0].dimensions.map(d => ({label: d.label,
        values: Array.from(d.values), tickvals: d.tickvals ? Array.from(d.tickvals) : null,
        ticktext: d.ticktext ? Array.from(d.ticktext) : null}))""")
    by_label = {d["label"]: d for d in dims}
    assert set(by_label) == {"batch", "extra.noise", "lr (log)", "x", "validation_loss"}  # no trial-id axis
    order = page.evaluate("() => Array.from(document.getElementById('hp-parcoords').data[0].meta)")
    assert sorted(order) == sorted(t["id"] for t in trials)
    for i, tid in enumerate(order):
        t = next(t for t in trials if t["id"] == tid)
        assert by_label["lr (log)"]["values"][i] == pytest.approx(math.log10(t["hparams"]["lr"]))
        assert by_label["batch"]["values"][i] == [20, 30, 40].index(t["hparams"]["batch"])
        assert by_label["x"]["values"][i] == pytest.approx(t["hparams"]["x"])
        assert by_label["extra.noise"]["values"][i] == pytest.approx(t["hparams"]["extra"]["noise"])  # nested
        assert by_label["validation_loss"]["values"][i] == pytest.approx(t["best_validation"])
    assert by_label["lr (log)"]["tickvals"] == [-4, -3, -2, -1]
    assert by_label["lr (log)"]["ticktext"] == ["0.0001", "0.001", "0.01", "0.1"]
    assert by_label["batch"]["tickvals"] == [0, 1, 2] and by_label["batch"]["ticktext"] == ["20", "30", "40"]
    # importance of the searched hyperparameters, and ASHA's rungs: 6 trials reported in the first rung
    page.wait_for_function("() => { const g = document.getElementById('hp-importance'); return g && g.data && g.data[0].y.length === 4; }")
    rung_counts = page.evaluate("() => { const d = document.getElementById('searcher-progress').data; return d[0].y.map((p, i) => p + d[1].y[i]); }")
    assert rung_counts[0] == 6 and rung_counts == sorted(rung_counts, reverse=True) and rung_counts[-1] >= 1
    # the trials table sorts by any metric
    page.click("#trials-table th[data-key='best']")
    page.wait_for_selector("#trials-table th.sorted-asc[data-key='best']")
    first = page.inner_text("#trials-table tbody tr:first-child td:nth-child(2)")
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    assert re.match(rf"^{best}\b", first)
    assert problems == []
    # a single-trial experiment has nothing to compare: no parallel coordinates, importance or rung chart
    page = running_page.page
    page.wait_for_selector("#single-trial-note", state="visible")
    assert page.is_hidden("#hparam-views") and page.is_hidden("#scatter-card") and page.is_hidden("#searcher-progress")


def test_config_and_model_code_on_the_experiment_page(asha_page: OpenPage) -> None:
    page, problems = asha_page.page, asha_page.problems
    page.wait_for_function("() => document.getElementById('exp-code').textContent.includes('class T')")
    config = page.inner_text("#exp-config")
    assert "searcher:\n  name: adaptive_asha" in config and "metric: validation_loss" in config
    assert page.input_value("#code-file") == "model.py"
    assert problems == []


def test_checkpoint_download_copy_and_register(ui_master: Dict[str, Any], browser: Any, artifacts: pathlib.Path) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    ckpt = api.get(f"/trials/{best}/checkpoints", states="COMPLETED")["checkpoints"][0]
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=ui_master["url"])
    try:
        page, problems = open_page(context, f"{ui_master['url']}/trials/{best}")
        row = f"#trial-checkpoints tr:has(code:text-is('{ckpt['uuid']}'))"
        page.wait_for_selector(row)
        page.click(f"{row} button[data-action='copy']")
        page.wait_for_selector(f"{row} button[data-action='copy']:text-is('Copied')")
        assert page.evaluate("() => navigator.clipboard.readText()") == ckpt["uuid"]
        with page.expect_download() as info:
            page.click(f"{row} button[data-action='download']")
        download = info.value
        assert download.suggested_filename == f"{ckpt['uuid']}.tar"  # GET /checkpoints/UUID/files, as the SDK reads it
        with tarfile.open(fileobj=io.BytesIO(pathlib.Path(download.path()).read_bytes())) as tar:
            state = json.load(tar.extractfile("state.json"))
        assert state["steps"] == ckpt["steps_completed"]
        page.click(f"{row} button[data-action='register']")
        page.fill("#register-model", "registered-from-ui")
        page.fill("#register-description", "from the trial page")
        page.screenshot(path=str(artifacts / "register-dialog.png"))
        page.click("#register-submit")
        page.wait_for_selector(f"{row} a.chip:text-is('registered-from-ui v1')", timeout=10000)
        version = api.get("/models/registered-from-ui/versions")["versions"][0]
        assert version["checkpoint"]["uuid"] == ckpt["uuid"] and version["version"] == 1
        assert problems == []
    finally:
        context.close()


def test_column_chooser_and_pinned_columns(asha_page: OpenPage) -> None:
    page, problems = asha_page.page, asha_page.problems
    summary = "#trials-table .col-chooser summary"
    try:
        page.set_viewport_size({"width": 900, "height": 800})
        # narrower than the table: hyperparameter columns collapse into one first, and the table fits again
        page.wait_for_function("""() => { const w = document.querySelector('#trials-table .table-scroll');
            return w.clientWidth < 900 && w.scrollWidth <= w.clientWidth + 1; }""")
        assert "hidden" in page.inner_text(summary)
        heads = page.evaluate("() => Array.from(document.querySelectorAll('#trials-table th[data-key]')).map(h => h.dataset.key)")
        assert "id" in heads and "state" in heads and "hp:x" not in heads and "hparams" in heads
        collapsed = page.inner_text("#trials-table tbody tr:first-child .collapsed-hparams")
        assert re.search(r"\bx=[\d.e-]+", collapsed)
        # asking for every column: the table scrolls sideways and the pinned columns stay in view
        page.click(summary)
        keys = page.evaluate("() => Array.from(document.querySelectorAll('#trials-table .col-menu input:not(:checked)')).map(i => i.dataset.key)")
        page.check(f"#trials-table .col-menu input[data-key='{keys[0]}']")  # a click of the user's
        # the others in one go (each click re-renders the table and its menu)
        page.evaluate("""(keys) => keys.forEach(k => document.querySelector(`#trials-table .col-menu input[data-key='${k}']`).click())""",
                      keys[1:])
        page.wait_for_selector("#trials-table th[data-key='hp:x']")
        page.evaluate("() => { document.querySelector('#trials-table .table-scroll').scrollLeft = 400; }")
        lefts = page.evaluate("""() => { const w = document.querySelector('#trials-table .table-scroll').getBoundingClientRect().left;
            const c = document.querySelector('#trials-table tbody tr td:nth-child(2)').getBoundingClientRect().left; return [w, c]; }""")
        assert lefts[1] >= lefts[0] - 1  # the trial id column did not scroll away
        stored = page.evaluate("() => JSON.parse(localStorage.getItem('det_columns:trials'))")
        assert stored["hp:x"] is True  # the choice is kept for the next visit
        page.click("#trials-table .col-menu button")  # reset
        page.wait_for_function("() => !document.querySelector(\"#trials-table th[data-key='hp:x']\")")
        assert problems == []
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def test_logs_follow_a_running_trial(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, running = ui_master["api"], ui_master["running"]
    trial = trial_ids(api, running)[0]
    page, problems = open_page(shared_context, f"{ui_master['url']}/trials/{trial}")
    try:
        page.wait_for_function("() => /batch \\d+: loss/.test(document.getElementById('logs').textContent)", timeout=30000)
        before = page.evaluate("() => document.querySelectorAll('#logs .log-line').length")
        page.wait_for_function(f"() => document.querySelectorAll('#logs .log-line').length > {before} + 2", timeout=30000)
        assert "starts at batch" in page.inner_text("#logs")
        assert "[master] run 1 starts at batch 0" in page.inner_text("#logs")
        assert problems == []
    finally:
        page.close()


def test_pause_and_activate_buttons(ui_master: Dict[str, Any], running_page: OpenPage, artifacts: pathlib.Path) -> None:
    api, running = ui_master["api"], ui_master["running"]
    page, problems = running_page.page, running_page.problems
    page.wait_for_selector("#btn-pause:not(.hidden)", timeout=20000)
    assert page.is_hidden("#btn-activate")
    page.click("#btn-pause")
    page.wait_for_selector("#exp-state >> text=PAUSED", timeout=10000)
    assert api.get(f"/experiments/{running}")["experiment"]["state"] == "PAUSED"
    api.wait(lambda: api.get("/cluster/slots")["used"] == 0, 40, "the paused trial to give its slot back")
    page.screenshot(path=str(artifacts / "experiment-paused.png"), full_page=True)
    page.click("#btn-activate")
    page.wait_for_selector("#exp-state >> text=ACTIVE", timeout=10000)
    assert api.get(f"/experiments/{running}")["experiment"]["state"] == "ACTIVE"
    assert problems == []


def test_login_needed_when_passwords_are_set(ui_master: Dict[str, Any], browser: Any, artifacts: pathlib.Path) -> None:
    """With a password on `determined` the automatic login fails, and every page asks for a login."""
    api, url = ui_master["api"], ui_master["url"]
    api.patch("/users/determined", {"password": "s3cret"})
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page, _ = open_page(context, url + f"/experiments/{ui_master['asha']}")
        page.wait_for_url(re.compile(r".*/login\?next=.*"), timeout=10000)
        page.fill("#password", "wrong")
        page.click("#login-submit")
        page.wait_for_selector("#login-error:not(.hidden)")
        page.screenshot(path=str(artifacts / "login.png"))
        page.fill("#password", "s3cret")
        page.click("#login-submit")
        page.wait_for_url(re.compile(rf".*/experiments/{ui_master['asha']}$"), timeout=10000)
        plot_ready(page, "learning-curves")
        assert page.evaluate("() => localStorage.getItem('det_token')")
        # a token the master does not know sends the page back to the login
        page.evaluate("() => localStorage.setItem('det_token', 'not-a-token')")
        page.goto(url + "/cluster")
        page.wait_for_url(re.compile(r".*/login\?next=%2Fcluster$"), timeout=10000)
    finally:
        context.close()
        admin = Api(url, "admin")
        admin.patch("/users/determined", {"password": ""})  # the change revoked the tokens of `determined`
        api.login("determined", "")


def test_the_ui_writes_numbers_and_durations_as_the_cli_does(asha_page: OpenPage) -> None:
    from determined.common.formats import fmt_duration, fmt_number

    numbers = [0, 1, 16, 123456, 0.5, 2.5, 0.98234567, 1.23456e-05, 0.0001, 0.00012345678, 12345.678, 123456.7,
               -0.25, 9.99996, 3.0e-7, 1e20]
    shown = asha_page.page.evaluate(f"() => {json.dumps(numbers)}.map(det.fmtNum)")
    assert shown == [fmt_number(v) for v in numbers]
    seconds = [0, 42, 187, 3600, 7500, 300000]
    assert asha_page.page.evaluate(f"() => {json.dumps(seconds)}.map(det.fmtSeconds)") == [fmt_duration(s) for s in seconds]


def test_the_experiment_page_reads_downsampled_curves(ui_master: Dict[str, Any], asha_page: OpenPage,
                                                     request_log: List[str]) -> None:
    asha = ui_master["asha"]
    reads = [urllib.parse.urlsplit(u) for u in request_log
             if urllib.parse.urlsplit(u).path == f"/api/v1/experiments/{asha}/metrics"]
    assert reads, "the experiment page did not read its learning curves"
    for url in reads:  # every read names its point count: the master downsamples each trial's series
        (points,) = urllib.parse.parse_qs(url.query)["max_points"]
        assert 4 <= int(points) <= 5000


def test_no_request_left_this_machine(request_log: List[str]) -> None:
    """Over every page and action of this module (the last test of it), the browser asked only 127.0.0.1."""
    assert len(request_log) > 50 and leaving(request_log) == []
