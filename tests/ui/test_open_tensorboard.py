""""Open TensorBoard" in Chromium: on the experiment page (1400 px) it launches a TensorBoard task of the experiment,
shows its state while it starts, and opens it in a new tab through the master's proxy (/proxy/<id>/), where
TensorBoard serves the experiment's trials; a second click (at 360 px, a phone's width) reuses the running one; the
experiments list's "TensorBoard" launches one TensorBoard of the selected experiments, and says why it did not open
when it ends before it answers."""
import pathlib
import re
from typing import Any, Dict, List

import pytest

PROXIED = re.compile(r"/proxy/([0-9a-f-]{36})/$")


def _open_tab(context: Any, page: Any, selector: str) -> Any:
    """Click `selector`; the tab it opens, once it reached a TensorBoard through the proxy."""
    with context.expect_page(timeout=30000) as opened:
        page.click(selector)
    tab = opened.value
    tab.wait_for_url(PROXIED, timeout=120000)
    return tab


def _runs(tab: Any) -> List[str]:
    """TensorBoard's runs, read by the tab itself (through the proxy, with the tab's own cookie)."""
    tab.wait_for_function("""async () => {
        const r = await fetch("data/runs");
        return r.ok && (await r.json()).length > 0;
    }""", timeout=60000, polling=500)
    return list(tab.evaluate("""() => fetch("data/runs").then((r) => r.json())"""))


def _fits(page: Any) -> None:
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"


def test_open_tensorboard_from_the_experiment_page_and_the_list(ui_master: Dict[str, Any], browser: Any,
                                                                 artifacts: pathlib.Path) -> None:
    pytest.importorskip("tensorboard")
    api, url, asha, running = ui_master["api"], ui_master["url"], ui_master["asha"], ui_master["running"]
    trials = sorted(t["id"] for t in api.get(f"/experiments/{asha}")["trials"])
    launched: List[str] = []
    wide = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = wide.new_page()
        errors: List[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/experiments/{asha}")
        page.locator("#exp-state", has_text="COMPLETED").wait_for(timeout=30000)
        assert not [t for t in api.get("/tensorboards", active="true")["tasks"] if t["experimentIds"] == [asha]]

        tab = _open_tab(wide, page, "#btn-tensorboard")
        task_id = PROXIED.search(tab.url).group(1)  # type: ignore[union-attr]
        launched.append(task_id)
        task = api.get(f"/tensorboards/{task_id}")["task"]
        assert task["experimentIds"] == [asha] and task["state"] == "STATE_RUNNING"
        assert sorted(_runs(tab)) == [f"experiment_{asha}/trial_{t}" for t in trials]
        assert "det_open" not in tab.url  # the one-time code was traded for the proxy's cookie
        status = page.locator("#tb-status")
        status.filter(has_text="is open in a new tab").wait_for(timeout=10000)
        tab.screenshot(path=str(artifacts / "open-tensorboard-tab-1400.png"))
        page.screenshot(path=str(artifacts / "open-tensorboard-1400.png"))
        tab.close()

        # At a phone's width: the button is there, the page fits, and a second click reuses the running TensorBoard.
        page.set_viewport_size({"width": 360, "height": 740})
        status.evaluate("(box) => { box.textContent = ''; }")
        assert page.locator("#btn-tensorboard").is_visible()
        again = _open_tab(wide, page, "#btn-tensorboard")
        assert PROXIED.search(again.url).group(1) == task_id  # type: ignore[union-attr]
        status.filter(has_text="is open in a new tab").wait_for(timeout=10000)
        _fits(page)
        page.screenshot(path=str(artifacts / "open-tensorboard-360.png"))
        again.close()
        mine = [t for t in api.get("/tensorboards", active="true")["tasks"] if t["experimentIds"] == [asha]]
        assert [t["id"] for t in mine] == [task_id]

        # The experiments list: tick two experiments, "TensorBoard" launches one TensorBoard of both and follows it;
        # killed before it answers, the list says why it did not open.
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(url + "/")
        for exp_id in (asha, running):
            page.check(f"#experiments-table input.row-select[data-id='{exp_id}']")
        page.locator("#bulk-count", has_text="2 selected").wait_for(timeout=10000)
        with wide.expect_page(timeout=30000):
            page.click("#bulk-tensorboard")
        line = page.locator("#bulk-tensorboard-status")
        line.filter(has_text=f"for experiments {min(asha, running)}, {max(asha, running)}").wait_for(timeout=30000)
        both = api.wait(lambda: [t for t in api.get("/tensorboards")["tasks"]
                                 if t["experimentIds"] == sorted([asha, running])], 30, "the list's TensorBoard")
        assert len(both) == 1
        launched.append(both[0]["id"])
        api.post(f"/tensorboards/{both[0]['id']}/kill")
        line.filter(has_text=re.compile("did not start|is open")).wait_for(timeout=60000)
        if "did not start" in line.inner_text():  # (else it had answered before the kill: opened, as above)
            assert "killed by determined" in line.inner_text() and "refused" in line.get_attribute("class")
        page.screenshot(path=str(artifacts / "open-tensorboard-list-1400.png"))
        assert errors == []
    finally:
        wide.close()
        for task_id in launched:
            api.post(f"/tensorboards/{task_id}/kill")
