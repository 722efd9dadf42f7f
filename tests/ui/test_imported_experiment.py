"""An experiment imported from a Determined 0.38 database (`det import determined --logs` against a server master,
over HTTP) in the web UI: its experiment page lists its trials and draws their learning curves; a trial's page
draws its metrics, lists its checkpoints and shows its imported log lines."""
import pathlib
from typing import Any, Iterator, Tuple

import pytest

from determined.master import embedded
from tests import _postgres
from tests.client._cli import det
from tests.importer import _source_db
from tests.ui.conftest import Api
from tests.ui.test_browser import check_page, open_page, plot_ready, traces

pytestmark = pytest.mark.skipif(not _postgres.available(), reason="PostgreSQL is not installed")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Any, Any, dict]]:
    """A server master on 127.0.0.1 that a Determined 0.38 database was imported into, with its logs."""
    tmp = tmp_path_factory.mktemp("imported-ui")
    storage = {"type": "shared_fs", "host_path": str(tmp / "ckpts")}
    url = _postgres.shared_server().create_database("det_src_ui")
    facts = _source_db.build(url, "0.38", [storage, storage], metric_rows=2000)
    master = embedded.start(tmp / "master")
    try:
        proc = det("-m", master.url, "-u", "admin", "import", "determined", "--db-url", url, "--logs", "-y")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Imported from Determined cluster cluster-0.38" in proc.stdout
        yield master, Api(master.url), facts
    finally:
        master.stop(timeout=20)


def test_logs_imported_through_a_server_master(imported: Tuple[Any, Any, dict]) -> None:
    _, api, facts = imported
    for trial in (1, 40):
        lines = [entry["message"] for entry in api.get(f"/trials/{trial}/logs")["logs"]]
        assert [f"trial {trial} line {n}" for n in range(5)] == [x for x in lines if x.startswith("trial ")]


def test_imported_experiment_and_trial_pages(imported: Tuple[Any, Any, dict], shared_context: Any) -> None:
    master, api, facts = imported
    page, problems = open_page(shared_context, f"{master.url}/experiments/1")
    try:
        page.wait_for_selector("#trials-table tbody tr", timeout=60000)
        assert page.locator("#trials-table tbody tr").count() == 4
        assert "experiment 1" in page.inner_text("body")
        plot_ready(page, "learning-curves")
        drawn = traces(page, "learning-curves")
        assert {t["meta"] for t in drawn} == {1, 2, 3, 4}
        # trial 1's training loss as the source held it (every point: 40 reports fit the curve's budget)
        stored = api.get("/trials/1/metrics", group="training")
        assert [n for n in drawn if n["meta"] == 1 and "loss" in n["name"] and "validation" not in n["name"]]
        assert len(stored["metrics"]) == 40
        check_page(page, problems, "/experiments/1", charts=True)

        page.goto(f"{master.url}/trials/1")
        uuid = next(u for u, f in facts["checkpoints"].items() if f["trial"] == 1)
        page.wait_for_selector(f"#trial-checkpoints code:text-is('{uuid}')", timeout=30000)
        assert page.locator("#trial-checkpoints tbody tr").count() == 6
        page.wait_for_selector("#trial-charts .metric-chart .main-svg", timeout=30000)
        page.wait_for_function("() => /trial 1 line 4/.test(document.getElementById('logs').textContent)",
                               timeout=30000)
        check_page(page, problems, "/trials/1", charts=True)
    finally:
        page.close()
