"""`core_context.experimental` (Determined 0.26): what report_task_using_checkpoint/_model_version send, that only
the chief sends it, that off the platform it is only logged, and that a wrong argument is named."""
import pathlib
from types import SimpleNamespace
from typing import Any, List, Tuple

import pytest

from determined import core
from determined.core._experimental import ExperimentalCoreContext


class RecordingSession:
    def __init__(self) -> None:
        self.posts: List[Tuple[str, Any]] = []

    def post(self, path: str, json: Any = None) -> Any:
        self.posts.append((path, json))
        return {}


def distributed(rank: int) -> Any:
    return SimpleNamespace(rank=rank)


CHECKPOINT = SimpleNamespace(uuid="c0ffee")
VERSION = SimpleNamespace(model_id=3, model_version=2, model_name="m", checkpoint=CHECKPOINT)


def test_the_chief_reports_the_checkpoint_and_the_model_version_for_its_trial() -> None:
    session = RecordingSession()
    chief = ExperimentalCoreContext(session, 7, distributed(0))  # type: ignore[arg-type]
    chief.report_task_using_checkpoint(CHECKPOINT)
    chief.report_task_using_model_version(VERSION)
    assert session.posts == [
        ("/trials/7/source_info", {"checkpoint_uuid": "c0ffee", "kind": "INFERENCE"}),
        ("/trials/7/source_info", {"model_id": 3, "model_version": 2, "checkpoint_uuid": "c0ffee",
                                   "kind": "INFERENCE"}),
    ]
    worker_session = RecordingSession()
    worker = ExperimentalCoreContext(worker_session, 7, distributed(1))  # type: ignore[arg-type]
    worker.report_task_using_checkpoint(CHECKPOINT)
    worker.report_task_using_model_version(VERSION)
    assert worker_session.posts == []


def test_wrong_arguments_are_named_on_every_rank() -> None:
    for rank in (0, 1):
        ctx = ExperimentalCoreContext(RecordingSession(), 7, distributed(rank))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected a Checkpoint of the SDK"):
            ctx.report_task_using_checkpoint("c0ffee")
        with pytest.raises(TypeError, match="expected a ModelVersion of the SDK"):
            ctx.report_task_using_model_version(CHECKPOINT)


def test_off_the_platform_it_is_logged(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("DET_TRIAL_ID", raising=False)
    caplog.set_level("INFO", logger="determined.core")
    with core.init(checkpoint_storage=str(tmp_path)) as ctx:
        ctx.experimental.report_task_using_model_version(VERSION)
        ctx.experimental.report_task_using_checkpoint(CHECKPOINT)
    assert "this run uses version 2 of model 'm' (checkpoint c0ffee) (not recorded: no master)" in caplog.text
    assert "this run uses checkpoint c0ffee (not recorded: no master)" in caplog.text
