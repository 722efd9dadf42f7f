"""TensorBoard: the event files trials write, read back with TensorBoard's reader; `det tensorboard start|list|kill`."""
import json
import pathlib
import shutil
import time
from typing import Any, Dict, List, Tuple

import httpx
import pytest

from determined import errors
from determined.core import _tensorboard
from determined.master.insights import tensorboard
from determined.cli.main import main as det_main


def det(capsys: pytest.CaptureFixture, *args: str) -> Tuple[int, str, str]:
    """`det ARGS` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = det_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def read_scalars(directory: pathlib.Path) -> Dict[str, List[Tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expected_scalars(api: Any, trial_id: int) -> Dict[str, List[Tuple[int, float]]]:
    """Every metric group of the trial (training, validation and those of report_metrics) as TensorBoard tags."""
    out: Dict[str, List[Tuple[int, float]]] = {}
    for group in api.get(f"/trials/{trial_id}")["metric_groups"]:
        for row in api.get(f"/trials/{trial_id}/metrics", group=group)["metrics"]:
            for name, value in row["metrics"].items():
                out.setdefault(f"{group}/{name}", []).append((row["steps_completed"], value))
    return out


def assert_same(read: Dict[str, List[Tuple[int, float]]], expected: Dict[str, List[Tuple[int, float]]]) -> None:
    assert set(read) == set(expected)
    for tag, points in expected.items():
        assert [s for s, _ in read[tag]] == [s for s, _ in points], tag
        assert [v for _, v in read[tag]] == pytest.approx([v for _, v in points], rel=1e-6), tag


def test_event_file_writer_round_trip(tmp_path: pathlib.Path) -> None:
    writer = _tensorboard.EventFileWriter(tmp_path)
    _tensorboard.write_metrics(writer, "training", 10, {"loss": 0.5, "name": "text", "bad": float("nan"), "flag": True})
    _tensorboard.write_metrics(writer, "training", 20, {"loss": 0.25})
    _tensorboard.write_metrics(writer, "validation", 20, {"acc": 0.75})
    writer.close()
    assert read_scalars(tmp_path) == {"training/loss": [(10, 0.5), (20, 0.25)], "validation/acc": [(20, 0.75)]}


def test_missing_tensorboard_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensorboard.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(errors.DeterminedError, match=r"pip install determined-revived\[tensorboard\]"):
        tensorboard.require_tensorboard()


@pytest.mark.slow
def test_trials_write_event_files_and_det_tensorboard_serves_them(ui_master: Dict[str, Any], capsys: pytest.CaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    api, url, asha = ui_master["api"], ui_master["url"], ui_master["asha"]
    root = pathlib.Path(ui_master["data_dir"]) / "tensorboard"
    trials = [t["id"] for t in api.get(f"/experiments/{asha}")["trials"]]
    expected = {t: expected_scalars(api, t) for t in trials}
    for t in trials:  # written by the trial processes themselves, through determined.core
        assert_same(read_scalars(_tensorboard.trial_dir(root, asha, t)), expected[t])

    # A trial that ran where the master's data dir is not (a remote worker) wrote nothing: the CLI writes its
    # event files from the master's metrics.
    remote = trials[0]
    shutil.rmtree(_tensorboard.trial_dir(root, asha, remote))
    monkeypatch.setenv("DET_MASTER", url)
    code, out, err = det(capsys, "tensorboard", "start", "--local", str(asha), "--json")
    assert code == 0, err
    instance = json.loads(out)
    try:
        assert_same(read_scalars(_tensorboard.trial_dir(root, asha, remote)), expected[remote])
        assert httpx.get(instance["url"], timeout=10).status_code == 200
        deadline = time.monotonic() + 60
        runs: List[str] = []
        while time.monotonic() < deadline and len(runs) < len(trials):
            runs = httpx.get(instance["url"] + "data/runs", timeout=10).json()
            time.sleep(0.5)
        assert sorted(runs) == sorted(f"trial_{t}" for t in trials)
        tags = httpx.get(instance["url"] + "data/plugin/scalars/tags", timeout=10).json()
        assert "validation/validation_loss" in tags[f"trial_{remote}"]

        code, out, err = det(capsys, "tensorboard", "list", "--local", "--json")
        assert [i["id"] for i in json.loads(out)] == [instance["id"]]
    finally:
        code, out, err = det(capsys, "tensorboard", "kill", "--local", instance["id"])
    assert code == 0, err
    with pytest.raises(httpx.HTTPError):
        httpx.get(instance["url"], timeout=3)
    assert json.loads(det(capsys, "tensorboard", "list", "--local", "--json")[1]) == []
    code, out, err = det(capsys, "tensorboard", "kill", "--local", instance["id"])
    assert code == 1 and "no TensorBoard with id" in err
