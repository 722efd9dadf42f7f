"""What the UI shows must be true (issue 34): sparse validation points are drawn where they are (no smoothing by
default), an ETA waits for evidence, a trial's duration is the same quantity before and after it ends, batch axes
are integers (and one point gets a sane axis), an unknown experiment or path says so, the Cluster page shows its
headers whole and a running trial as RUNNING, a master that stopped is said to have stopped, and at 1280 px the
columns that matter are shown whole."""
import re
from typing import Any, Dict, Iterator, List

import httpx
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield ctx
    finally:
        ctx.close()


def best_trial(ui_master: Dict[str, Any]) -> int:
    return ui_master["api"].get(f"/experiments/{ui_master['asha']}")["experiment"]["best_trial_id"]


def test_validation_points_are_drawn_where_they_are_by_default(ui_master: Dict[str, Any], context: Any) -> None:
    api, best = ui_master["api"], best_trial(ui_master)
    reported = [m["metrics"]["validation_loss"] for m in api.get(f"/trials/{best}")["validation_metrics"]]
    page = context.new_page()
    try:
        page.goto(f"{ui_master['url']}/trials/{best}")
        page.wait_for_selector("#trial-charts .metric-chart[data-metric='loss'] .main-svg", timeout=30000)
        assert page.input_value("#trial-controls .smoothing") == "0"
        drawn = page.evaluate("""() => document.querySelector(".metric-chart[data-metric='loss']").data
            .filter(t => t.name === 'validation_loss').map(t => Array.from(t.y))""")
        assert drawn == [reported]
        # smoothed, the markers stay on the reported values: the smoothed line has none
        page.fill("#trial-controls .smoothing", "0.6")
        page.dispatch_event("#trial-controls .smoothing", "input")
        page.wait_for_function("() => document.querySelector(\".metric-chart[data-metric='loss']\").data.some(t => t.name.endsWith('(raw)'))")
        traces = page.evaluate("""() => document.querySelector(".metric-chart[data-metric='loss']").data
            .map(t => ({name: t.name, mode: t.mode, y: Array.from(t.y)}))""")
        marked = [t for t in traces if "markers" in t["mode"]]
        assert marked and all(t["y"] == reported for t in marked if "validation" in t["name"])
        assert all("markers" not in t["mode"] for t in traces if not t["name"].endswith("(raw)") and len(t["y"]) > 1)
    finally:
        page.close()


def test_no_eta_before_there_is_evidence(ui_master: Dict[str, Any], context: Any) -> None:
    page = context.new_page()
    try:
        page.goto(f"{ui_master['url']}/experiments/{ui_master['running']}")
        page.wait_for_selector("#exp-elapsed", timeout=30000)
        page.wait_for_timeout(3000)  # two polls: not yet enough to know the pace
        assert page.locator("#exp-eta").count() == 0
        assert "estimating" in page.inner_text("#exp-summary")
    finally:
        page.close()


def test_a_trials_duration_is_the_same_quantity_before_and_after_it_ends(ui_master: Dict[str, Any],
                                                                         context: Any) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    page = context.new_page()
    try:
        page.goto(f"{ui_master['url']}/experiments/{asha}")
        page.wait_for_selector("#trials-table tbody tr", timeout=60000)
        start = "2024-01-01T00:00:00Z"
        seconds = page.evaluate(f"""() => {{
            const start = Date.parse('{start}');
            const t = (status, end) => ({{status, state: end ? 'COMPLETED' : 'ACTIVE', start_time: '{start}', end_time: end}});
            return [
              det.trialSeconds(t('RUNNING', null), null, start + 38000),
              det.trialSeconds(t('WAITING', null), new Date(start + 11000).toISOString(), start + 38000),
              det.trialSeconds(t('STOPPED', new Date(start + 11500).toISOString()), new Date(start + 11000).toISOString(), start + 99000),
            ];
        }}""")
        assert seconds == [38, 11, 11.5]
        shown = dict(page.evaluate("""() => Array.from(document.querySelectorAll('#trials-table tbody tr')).map(r =>
            [r.querySelector('a').textContent.split(' ')[0], r.querySelector('td.duration').textContent])"""))
        for t in api.get(f"/experiments/{asha}")["trials"]:
            expected = page.evaluate(f"() => det.fmtDuration('{t['start_time']}', '{t['end_time']}')")
            assert shown[str(t["id"])] == expected
    finally:
        page.close()


def test_batch_axes_are_integers_and_one_point_reads_sanely(ui_master: Dict[str, Any], context: Any) -> None:
    page = context.new_page()
    try:
        page.goto(f"{ui_master['url']}/trials/{best_trial(ui_master)}")
        page.wait_for_selector("#trial-charts .metric-chart .main-svg", timeout=30000)
        ticks = page.evaluate("""async () => {
            const div = document.createElement('div');
            div.style.width = '600px';
            document.body.append(div);
            const q = {key: 'loss', names: {validation: 'validation_loss'}};
            const view = curves.newView();
            const s = [{id: 1, label: '', color: '#000', ctx: {batchSize: 1, recordsPerEpoch: 0},
                        groups: {validation: [{steps_completed: 1000, end_time: '2024-01-01T00:00:00Z', metrics: {validation_loss: 0.5}}]}}];
            const tr = curves.traces(s, q, view);
            await det.plot(div, tr, curves.layout(q, view, 300, tr));
            const out = Array.from(div.querySelectorAll('.xtick text')).map(t => t.textContent);
            div.remove();
            return out;
        }""")
        assert ticks and "1000" in [t.replace(",", "") for t in ticks]
        assert all(re.fullmatch(r"[\d,]+", t) for t in ticks), ticks
        assert len(set(ticks)) == len(ticks)
        # the trial's own charts: batches are whole numbers
        real = page.evaluate("() => Array.from(document.querySelectorAll('#trial-charts .xtick text')).map(t => t.textContent)")
        assert real and all(re.fullmatch(r"[\d,]+", t) for t in real), real
    finally:
        page.close()


@pytest.mark.parametrize("path,what", [("/experiments/999", "Experiment 999"), ("/trials/999999", "Trial 999999"),
                                       ("/models/no-such-model", "no-such-model")])
def test_an_unknown_object_says_it_does_not_exist(ui_master: Dict[str, Any], context: Any, path: str,
                                                   what: str) -> None:
    page = context.new_page()
    try:
        page.goto(ui_master["url"] + path)
        page.wait_for_selector("#not-found", timeout=20000)
        text = page.inner_text("main")
        assert what in text and "does not exist" in text
        assert "Could not reach the master" not in page.inner_text("body")
        assert page.locator("main .card:visible").count() == 0
    finally:
        page.close()


def test_an_unknown_path_is_an_html_404_for_a_browser(ui_master: Dict[str, Any]) -> None:
    url = ui_master["url"]
    html = httpx.get(url + "/no/such/page", headers={"Accept": "text/html,application/xhtml+xml"})
    assert html.status_code == 404 and html.headers["content-type"].startswith("text/html")
    assert "/no/such/page" in html.text and 'href="/"' in html.text and "Not found" in html.text
    non_numeric = httpx.get(url + "/experiments/abc", headers={"Accept": "text/html"})
    assert non_numeric.status_code == 404 and non_numeric.headers["content-type"].startswith("text/html")
    # API clients keep the JSON answer
    plain = httpx.get(url + "/no/such/page", headers={"Accept": "application/json"})
    assert plain.status_code == 404 and plain.json()["detail"]
    api = httpx.get(url + "/api/v1/no/such/route", headers={"Accept": "text/html"})
    assert api.status_code in (401, 404) and api.headers["content-type"].startswith("application/json")  # 401: no token
    wrong_method = ui_master["api"].client.get("/auth/login")  # a route of another method stays a 405
    assert wrong_method.status_code == 405


def test_the_cluster_page_shows_its_headers_whole_and_says_running(ui_master: Dict[str, Any], context: Any) -> None:
    api = ui_master["api"]
    api.wait(lambda: api.get("/cluster/slots")["allocations"], 60, "a running trial")
    page = context.new_page()
    try:
        page.goto(ui_master["url"] + "/cluster")
        page.wait_for_selector("#allocations-table tbody tr a", timeout=30000)
        clipped = page.evaluate("""() => {
            const wrap = document.querySelector('#allocations-table .table-scroll').getBoundingClientRect();
            return Array.from(document.querySelectorAll('#allocations-table th')).filter(th => {
                const r = th.getBoundingClientRect();
                return r.right > wrap.right + 1 || th.scrollWidth > th.clientWidth + 1;
            }).map(th => th.textContent);
        }""")
        assert clipped == []
        states = page.evaluate("() => Array.from(document.querySelectorAll('#allocations-table td.trial-state')).map(td => td.textContent)")
        assert states and "ACTIVE" not in states and "RUNNING" in states
    finally:
        page.close()


def test_a_stopped_master_is_said_to_have_stopped(ui_master: Dict[str, Any], context: Any) -> None:
    page = context.new_page()
    try:
        page.goto(f"{ui_master['url']}/experiments/{ui_master['running']}")
        page.wait_for_selector("#exp-elapsed", timeout=30000)
        page.route("**/api/v1/**", lambda route: route.abort())  # as when the master serving the page has exited
        page.wait_for_function("() => !document.getElementById('status').classList.contains('hidden')", timeout=20000)
        text = page.inner_text("#status")
        assert "stopped" in text and "det master up" in text and "Could not reach" not in text
    finally:
        page.close()


def test_what_matters_is_shown_whole_at_1280(ui_master: Dict[str, Any], context: Any) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    best = best_trial(ui_master)
    page = context.new_page()
    clipped_js = """(sel) => Array.from(document.querySelectorAll(sel)).filter(e => e.offsetParent !== null &&
        (e.scrollWidth > e.clientWidth + 1)).map(e => e.textContent)"""
    heads = "(sel) => Array.from(document.querySelectorAll(sel + ' thead th')).map(th => th.textContent)"
    try:
        page.evaluate("() => 0")
        page.goto(ui_master["url"] + "/")
        page.wait_for_selector("#experiments-table tbody tr a", timeout=30000)
        page.wait_for_timeout(500)
        shown: List[str] = page.evaluate(heads, "#experiments-table")
        for column in ("Owner", "Project", "Started", "Labels", "Searcher"):
            assert column in shown, shown
        page.goto(f"{ui_master['url']}/experiments/{asha}")
        page.wait_for_selector("#trials-table tbody tr", timeout=60000)
        page.wait_for_timeout(500)
        shown = page.evaluate(heads, "#trials-table")
        assert "Why" in shown, shown
        assert page.evaluate(clipped_js, "#trials-table td, #trials-table td span") == []
        hparams = [h["name"] for h in api.get(f"/experiments/{asha}")["experiment"]["searched_hparams"]]
        text = page.inner_text("#trials-table")
        assert all(name in text for name in hparams)
        page.goto(f"{ui_master['url']}/trials/{best}")
        page.wait_for_selector("#trial-checkpoints tbody tr", timeout=30000)
        page.wait_for_timeout(500)
        assert "Validation" in page.evaluate(heads, "#trial-checkpoints")
        assert page.evaluate(clipped_js, "#trial-checkpoints td, #trial-checkpoints td span") == []
        models = [m["name"] for m in api.get("/models")["models"]]
        if not models:
            ckpt = api.get(f"/trials/{best}/checkpoints", states="COMPLETED")["checkpoints"][-1]
            api.post("/models/truth-model", {"description": "", "metadata": {}})
            api.post("/models/truth-model/versions", {"checkpoint_uuid": ckpt["uuid"]})
            models = ["truth-model"]
        page.goto(f"{ui_master['url']}/models/{models[0]}")
        page.wait_for_selector("#versions-table tbody tr", timeout=30000)
        page.wait_for_timeout(500)
        assert "Validation" in page.evaluate(heads, "#versions-table")
        assert page.evaluate(clipped_js, "#versions-table td, #versions-table td span") == []
    finally:
        page.close()
