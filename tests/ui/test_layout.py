"""Every page of the web UI at a phone's, a tablet's, a laptop's and a big screen's size (390x844, 768x1024,
1280x800, 2560x1440): nothing wider than the window, every item of the top bar readable (a contrast of at least
4.5:1 between its rendered color and the background it is drawn on), and no chart legend over its plot (nor
eating most of the chart). Screenshots go to the artifacts folder as `layout-PAGE-WIDTH.png`."""
import pathlib
from typing import Any, Dict, Iterator, List, Tuple

import pytest

pytestmark = pytest.mark.slow

VIEWPORTS = [(390, 844), (768, 1024), (1280, 800), (2560, 1440)]

# Each item of the top bar: its text, its color, and the color of what is really behind it (the nearest
# ancestor with a background whose box holds the item; an item pushed out of its bar is on the page's background).
TOPBAR_COLORS = """() => {
  const rgba = (s) => { const m = s.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const inside = (r, box) => r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
  const items = Array.from(document.querySelectorAll('.topbar a, .topbar #whoami, .topbar #logout'))
    .filter((e) => e.offsetParent !== null && e.textContent.trim());
  return items.map((e) => {
    const r = e.getBoundingClientRect();
    let node = e.parentElement, bg = [255, 255, 255, 1];
    while (node) {
      const c = rgba(getComputedStyle(node).backgroundColor);
      if (c[3] > 0.5 && inside(r, node.getBoundingClientRect())) { bg = c; break; }
      node = node.parentElement;
    }
    if (!node) bg = rgba(getComputedStyle(document.body).backgroundColor);
    return {text: e.textContent.trim(), fg: rgba(getComputedStyle(e).color), bg,
            box: [r.left, r.top, r.right, r.bottom]};
  });
}"""

# Each drawn cartesian chart: its plot area (the main drag rectangle), its legend, and the chart's own width.
CHART_BOXES = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter((g) => g.offsetParent !== null)
  .map((g) => {
    const box = (e) => { if (!e) return null; const r = e.getBoundingClientRect(); return r.width && r.height ? [r.left, r.top, r.right, r.bottom] : null; };
    const plot = g.querySelector('.draglayer .xy .nsewdrag') || g.querySelector('.nsewdrag');
    const legend = g.querySelector('g.legend');
    return {id: g.id || g.dataset.metric || g.dataset.hparam || '', width: g.getBoundingClientRect().width,
            plot: box(plot), legend: legend && legend.querySelector('.traces') ? box(legend.querySelector('.bg') || legend) : null};
  })"""


def luminance(rgb: List[float]) -> float:
    def channel(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * channel(rgb[0]) + 0.7152 * channel(rgb[1]) + 0.0722 * channel(rgb[2])


def contrast(fg: List[float], bg: List[float]) -> float:
    alpha = fg[3] if len(fg) > 3 else 1
    mixed = [fg[i] * alpha + bg[i] * (1 - alpha) for i in range(3)]
    a, b = luminance(mixed), luminance(bg)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def overlap(a: List[float], b: List[float]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, width) * max(0.0, height)


@pytest.fixture(scope="module")
def layout_pages(ui_master: Dict[str, Any]) -> List[Tuple[str, str, str, bool]]:
    """(name, path, a selector that is there once the page has its data, whether it draws charts)."""
    api, asha = ui_master["api"], ui_master["asha"]
    best = api.get(f"/experiments/{asha}")["experiment"]["best_trial_id"]
    if not any(m["name"] == "layout-model" for m in api.get("/models")["models"]):
        ckpt = api.get(f"/trials/{best}/checkpoints", states="COMPLETED")["checkpoints"][-1]
        api.post("/models/layout-model", {"description": "the best of the ASHA search", "metadata": {"team": "ui"}})
        api.post("/models/layout-model/versions", {"checkpoint_uuid": ckpt["uuid"]})
    return [
        ("experiments", "/", "#experiments-table tbody tr a", False),
        ("experiment", f"/experiments/{asha}", "#trials-table tbody tr", True),
        ("trial", f"/trials/{best}", "#trial-charts .metric-chart .main-svg", True),
        ("models", "/models", "#models-table tbody tr a", False),
        ("model", "/models/layout-model", "#versions-table tbody tr", False),
        ("workspaces", "/workspaces", "section.workspace", False),
        ("cluster", "/cluster", "#allocations-table tbody tr a", False),
    ]


@pytest.fixture(scope="module", params=VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def sized_context(request: Any, browser: Any) -> Iterator[Tuple[Any, int]]:
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        yield context, width
    finally:
        context.close()


def test_every_page_fits_reads_and_keeps_legends_off_plots(ui_master: Dict[str, Any], sized_context: Tuple[Any, int],
                                                           layout_pages: List[Tuple[str, str, str, bool]],
                                                           artifacts: pathlib.Path) -> None:
    context, width = sized_context
    failures: List[str] = []
    for name, path, marker, charts in layout_pages:
        page = context.new_page()
        errors: List[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(ui_master["url"] + path)
            page.wait_for_selector(marker, timeout=60000)
            if charts:
                page.wait_for_function("() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(g => g.querySelector('g.legend, .main-svg'))",
                                       timeout=30000)
            page.wait_for_timeout(700)  # tables fit, plotly's responsive resize settles
            page.screenshot(path=str(artifacts / f"layout-{name}-{width}.png"), full_page=True)
            scroll = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            if scroll[0] > scroll[1]:
                failures.append(f"{name} at {width}: the page lays out {scroll[0]} px wide in a {scroll[1]} px window")
            for item in page.evaluate(TOPBAR_COLORS):
                ratio = contrast(item["fg"], item["bg"])
                if ratio < 4.5:
                    failures.append(f"{name} at {width}: top bar item {item['text']!r} has a contrast of {ratio:.2f}")
                if item["box"][2] > scroll[1] + 1:
                    failures.append(f"{name} at {width}: top bar item {item['text']!r} is outside the window")
            for chart in page.evaluate(CHART_BOXES):
                if not chart["plot"]:
                    continue  # parallel coordinates: no cartesian plot area, no legend
                plot_width = chart["plot"][2] - chart["plot"][0]
                if plot_width < 0.5 * chart["width"]:
                    failures.append(f"{name} at {width}: chart {chart['id']!r} plots in {plot_width:.0f} of its "
                                    f"{chart['width']:.0f} px")
                if chart["legend"] and overlap(chart["legend"], chart["plot"]) > 1:
                    failures.append(f"{name} at {width}: the legend of chart {chart['id']!r} covers its plot")
            if errors:
                failures.append(f"{name} at {width}: {errors}")
        finally:
            page.close()
    assert failures == []
