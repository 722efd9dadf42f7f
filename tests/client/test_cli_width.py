"""At 80 columns no number and no UUID is cut (README: "numbers are never cut"): a metrics cell wraps onto more
lines, or moves under its row when even one `name=value` does not fit beside the others; a UUID is shown whole."""
import pathlib
import re
import uuid
from typing import Any, Dict, Iterator

import pytest

from determined.common.formats import fmt_number
from determined.common.table import KEY, NUMBER, TEXT, WRAP, Column, render
from determined.master import embedded
from tests.client._cli import det
from tests.master._helpers import model_def

ACCURACY, LOSS = 0.98123456, 0.0512345


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("cli-width") / "data"
    session = embedded.in_process_session(data_dir)
    config = {"entrypoint": "model:T", "max_restarts": 0,
              "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 400}},
              "hyperparameters": {"global_batch_size": 8}}
    exp = session.post("/experiments", {"config": config, "model_definition": model_def()})["experiment"]["id"]
    trial = session.get(f"/experiments/{exp}")["trials"][0]["id"]
    session.post(f"/trials/{trial}/training_metrics", {"steps_completed": 400, "metrics": {"loss": 0.25}})
    session.post(f"/trials/{trial}/validation_metrics",
                 {"steps_completed": 400, "metrics": {"validation_accuracy": ACCURACY, "validation_loss": LOSS}})
    ckpt = str(uuid.uuid4())
    session.post(f"/trials/{trial}/checkpoints", {"uuid": ckpt, "steps_completed": 400, "resources": {"m.pt": 10},
                                                   "framework": "torch", "format": "pickle", "metadata": {}})
    session.post(f"/trials/{trial}/searcher/completed_operation", {"length": 400, "metric": LOSS})
    session.post("/models/mnist-classifier", {"description": "the digits model", "metadata": {"team": "vision"}})
    session.post("/models/mnist-classifier/versions", {"checkpoint_uuid": ckpt})
    session._client.app.state.master.stop()
    yield {"data_dir": data_dir, "trial": trial, "uuid": ckpt}


@pytest.fixture
def at80(monkeypatch: pytest.MonkeyPatch, data: Dict[str, Any]) -> Dict[str, Any]:
    monkeypatch.setenv("DET_DATA_DIR", str(data["data_dir"]))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("DET_MASTER", raising=False)
    return data


def _whole(out: str, data: Dict[str, Any]) -> None:
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "…" not in out, out
    assert data["uuid"] in out, out
    for part in (f"validation_accuracy={fmt_number(ACCURACY)}", f"validation_loss={fmt_number(LOSS)}"):
        assert part in out, out


@pytest.mark.parametrize("argv", [["trial", "describe"], ["trial", "describe", "--metrics"]])
def test_trial_describe_at_80_columns_cuts_no_number_or_uuid(at80: Dict[str, Any], argv: Any) -> None:
    out = det(*argv, str(at80["trial"]), check=True).stdout
    _whole(out, at80)


@pytest.mark.parametrize("argv", [["model", "describe", "mnist-classifier"],
                                  ["model", "list-versions", "mnist-classifier"]])
def test_model_commands_at_80_columns_cut_no_number_or_uuid(at80: Dict[str, Any], argv: Any) -> None:
    out = det(*argv, check=True).stdout
    _whole(out, at80)


def test_model_list_at_80_columns_cuts_no_name_number_or_time(at80: Dict[str, Any]) -> None:
    out = det("model", "list", check=True).stdout
    assert all(len(line) <= 80 for line in out.splitlines()), out
    (row,) = [line for line in out.splitlines() if line.startswith("mnist-classifier")]
    assert row.startswith("mnist-classifier  the digits model "), "the name (what describe takes) is whole"
    assert re.search(r"\s1\s", row), "the number of versions"
    times = re.findall(r"\d{4}-\d\d-\d\d\S*(?: \S+)?", out)
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", t) for t in times), out
    assert "…" not in out, out
    assert "(not shown to fit 80 columns: Metadata, Created;" in out, "what was left out is named"


def test_a_wrapped_cell_breaks_between_its_parts_and_moves_under_its_row_when_it_cannot_fit() -> None:
    metrics = "a_long_metric_name=0.123456, another_metric=12345, third=1.5e-07"
    lines = render([Column("Batches", NUMBER), Column("Metrics", WRAP)], [[100, metrics]], width=40)
    assert all(len(line) <= 40 for line in lines), lines
    text = " ".join(" ".join(lines).split())
    for part in metrics.split(", "):
        assert part in text, lines
    uid = str(uuid.UUID(int=7))
    lines = render([Column("Id", KEY), Column("Metrics", WRAP)], [[uid, metrics]], width=50)
    assert lines[2].rstrip() == uid, lines  # the metrics could not fit beside the UUID: under the row
    assert all(len(line) <= 50 for line in lines), lines
    assert "a_long_metric_name=0.123456," in " ".join(lines[3:]), lines


def test_shortened_text_never_ends_inside_a_number_or_uuid() -> None:
    uid = str(uuid.UUID(int=2 ** 100 + 12345))
    for text in (f"trained from {uid} at lr 0.000123456", "loss went from 1234567.5 down to 0.5 in the end"):
        for width in range(12, len(text)):
            cell = render([Column("Note", TEXT)], [[text]], width=width)[2]
            shown = cell.rstrip().rstrip("…")
            for token in re.findall(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d[\d.]*", text):
                start = text.find(token)
                if start < len(shown):  # a number or UUID that shows at all shows whole
                    assert shown[start:start + len(token)] == token, (width, cell)
