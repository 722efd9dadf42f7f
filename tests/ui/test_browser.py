"""The web UI in headless Chromium against a master holding a finished ASHA experiment and a running one."""
import pathlib
import re
from typing import Any, Dict, List, Tuple

import pytest

from tests.ui.conftest import Api

pytestmark = pytest.mark.slow


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


def test_every_page_loads_without_console_errors(ui_master: Dict[str, Any], shared_context: Any, artifacts: pathlib.Path) -> None:
    api, url, asha, running = ui_master["api"], ui_master["url"], ui_master["asha"], ui_master["running"]
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    ckpt = api.get(f"/trials/{best}/checkpoints", states="COMPLETED")["checkpoints"][-1]
    api.post("/models/ui-model", {"description": "the best of the ASHA search", "metadata": {"team": "ui"}})
    api.post("/models/ui-model/versions", {"checkpoint_uuid": ckpt["uuid"]})
    running_trial = trial_ids(api, running)[0]
    pages = [
        ("experiments", "/", "#experiments-table tbody tr a", None),
        ("experiment-asha", f"/experiments/{asha}", "#trials-table tbody tr", "learning-curves"),
        ("experiment-running", f"/experiments/{running}", "#trials-table tbody tr", "learning-curves"),
        ("trial-asha", f"/trials/{best}", "#trial-checkpoints tbody tr", None),
        ("trial-running", f"/trials/{running_trial}", "#trial-hparams tr", None),
        ("models", "/models", "#models-table tbody tr a", None),
        ("model", "/models/ui-model", "#versions-table tbody tr", None),
        ("cluster", "/cluster", "#allocations-table tbody tr a", None),
        ("login", "/login", "#login-form", None),
    ]
    for name, path, marker, chart in pages:
        page, problems = open_page(shared_context, url + path)
        try:
            page.wait_for_selector(marker, timeout=20000)
            if chart:
                plot_ready(page, chart)
                plot_ready(page, "hp-parcoords")
                plot_ready(page, "searcher-progress")
            if name.startswith("trial"):
                page.wait_for_selector("#trial-charts .metric-chart .main-svg", timeout=20000)
            page.wait_for_timeout(200)
            page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
            assert problems == [], f"{path}: {problems}"
        finally:
            page.close()
    # the list shows both experiments with their state, and the cluster the running trial on its slot
    page, _ = open_page(shared_context, url + "/")
    try:
        page.wait_for_selector(f"#experiments-table a[href='/experiments/{asha}']")
        text = page.inner_text("#experiments-table")
        assert "COMPLETED" in text and "ACTIVE" in text and "adaptive_asha" in text
        page.fill("#filter", "ui running")
        page.wait_for_function("() => document.querySelectorAll('#experiments-table tbody tr').length === 1")
    finally:
        page.close()


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


def test_learning_curves_hold_one_line_per_trial_with_every_point(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    expected: Dict[str, Dict[int, int]] = {"validation": {}, "training": {}}
    for tid in trial_ids(api, asha):
        described = api.get(f"/trials/{tid}")
        expected["validation"][tid] = len(described["validation_metrics"])
        expected["training"][tid] = sum(1 for m in described["training_metrics"] if "loss" in m["metrics"])
    page, problems = open_page(shared_context, f"{ui_master['url']}/experiments/{asha}")
    try:
        plot_ready(page, "learning-curves")
        assert page.input_value("#metric-picker") == "validation:validation_loss"
        for choice, kind in (("validation:validation_loss", "validation"), ("training:loss", "training")):
            page.select_option("#metric-picker", choice)
            page.wait_for_function(f"() => document.getElementById('learning-curves').layout.yaxis.title.text === '{choice.split(':')[1]}'")
            traces = page.evaluate("() => document.getElementById('learning-curves').data.map(t => [t.meta, t.x.length, t.line.width])")
            assert {meta: n for meta, n, _ in traces} == expected[kind]
            assert len(traces) == len(expected[kind])
            best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
            widths = {meta: w for meta, _, w in traces}
            assert widths[best] > max(w for meta, w in widths.items() if meta != best)  # the best trial stands out
        assert problems == []
    finally:
        page.close()


def test_parallel_coordinates_hold_every_trial(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, asha = ui_master["api"], ui_master["asha"]
    trials = api.get(f"/experiments/{asha}")["trials"]
    page, problems = open_page(shared_context, f"{ui_master['url']}/experiments/{asha}")
    try:
        plot_ready(page, "hp-parcoords")
        dims = page.evaluate("() => document.getElementById('hp-parcoords').data[0].dimensions.map(d => [d.label, Array.from(d.values)])")
        by_label = dict((label, values) for label, values in dims)
        assert sorted(by_label["trial"]) == sorted(t["id"] for t in trials)
        assert set(by_label) == {"trial", "x", "extra.noise", "validation_loss"}
        order = by_label["trial"]
        for t in trials:
            i = order.index(t["id"])
            assert by_label["x"][i] == pytest.approx(t["hparams"]["x"])
            assert by_label["extra.noise"][i] == pytest.approx(t["hparams"]["extra"]["noise"])
            assert by_label["validation_loss"][i] == pytest.approx(t["best_validation"])
        # one scatter per searched hyperparameter, each with every trial that has a metric
        page.wait_for_selector("#hp-scatter .scatter-plot[data-hparam='x'] .main-svg")
        counts = page.evaluate("() => Array.from(document.querySelectorAll('#hp-scatter .scatter-plot')).map(d => [d.dataset.hparam, d.data[0].x.length])")
        assert dict(counts) == {"x": len(trials), "extra.noise": len(trials)}
        # importance of both searched hyperparameters, and ASHA's rungs: 6 trials reported in the first rung
        page.wait_for_function("() => { const g = document.getElementById('hp-importance'); return g && g.data && g.data[0].y.length === 2; }")
        rung_counts = page.evaluate("() => { const d = document.getElementById('searcher-progress').data; return d[0].y.map((p, i) => p + d[1].y[i]); }")
        assert rung_counts[0] == 6 and rung_counts == sorted(rung_counts, reverse=True) and rung_counts[-1] >= 1
        # the trials table sorts by any metric
        page.click("#trials-table th[data-key='best']")
        page.wait_for_selector("#trials-table th.sorted-asc[data-key='best']")
        first = page.inner_text("#trials-table tbody tr:first-child td:first-child")
        best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
        assert re.match(rf"^{best}\b", first)
        assert problems == []
    finally:
        page.close()


def test_logs_follow_a_running_trial(ui_master: Dict[str, Any], shared_context: Any) -> None:
    api, running = ui_master["api"], ui_master["running"]
    trial = trial_ids(api, running)[0]
    page, problems = open_page(shared_context, f"{ui_master['url']}/trials/{trial}")
    try:
        page.wait_for_function("() => /batch \\d+: loss/.test(document.getElementById('logs').textContent)", timeout=30000)
        before = page.evaluate("() => document.querySelectorAll('#logs .log-line').length")
        page.wait_for_function(f"() => document.querySelectorAll('#logs .log-line').length > {before} + 2", timeout=30000)
        assert "starts at batch" in page.inner_text("#logs")
        assert problems == []
    finally:
        page.close()


def test_pause_and_activate_buttons(ui_master: Dict[str, Any], shared_context: Any, artifacts: pathlib.Path) -> None:
    api, running = ui_master["api"], ui_master["running"]
    page, problems = open_page(shared_context, f"{ui_master['url']}/experiments/{running}")
    try:
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
    finally:
        page.close()


def test_login_needed_when_passwords_are_set(ui_master: Dict[str, Any], browser: Any, artifacts: pathlib.Path) -> None:
    """With a password on `determined` the automatic login fails, and every page asks for a login."""
    api, url = ui_master["api"], ui_master["url"]
    api.patch("/users/determined", {"password": "s3cret"})
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
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
