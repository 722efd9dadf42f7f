"""Issue 33, finding 8: a quota on metrics. 20 reports of 13 MB from one trial pushed another user's p90 latency
from 0.14 s to 3.65 s. One metrics report is now at most METRICS_REPORT_BODY (1 MiB) of JSON: a larger one is
refused with 413 before it is read, the answer says what to do, and the trial's logs say why it failed."""
import json
from typing import Any, List, Tuple

import pytest
from sqlalchemy import select

from determined.master.db import Trial
from determined.master.security import request_limits

from ._helpers import InProcessMaster, create_experiment

TRIAL_TOKEN = "trial-run-token-for-the-size-test"


class RecordedLogs:
    def __init__(self) -> None:
        self.lines: List[Tuple[int, str, str]] = []

    def add(self, trial_id: int, timestamp: Any, stream: str, message: str) -> None:
        del timestamp
        self.lines.append((trial_id, stream, message))


@pytest.fixture
def trial(master: InProcessMaster) -> int:
    exp = create_experiment(master.session("determined"), max_trials=1)
    with master.master.write() as s:
        row = s.scalars(select(Trial).where(Trial.experiment_id == exp["id"])).one()
        row.session_token = TRIAL_TOKEN  # the token of the trial's run, as the launcher sets it
        return row.id


def _report(master: InProcessMaster, path: str, metrics_bytes: int) -> Any:
    body = json.dumps({"steps_completed": 10, "metrics": {"big": "x" * metrics_bytes}}).encode()
    return master.client().post(f"/api/v1/{path}", content=body, headers={
        "Authorization": f"Bearer {TRIAL_TOKEN}", "Content-Type": "application/json"})


def test_a_metrics_report_over_1_mib_is_refused_and_the_trial_log_says_why(master: InProcessMaster,
                                                                           trial: int) -> None:
    logs = RecordedLogs()
    master.master.log_writer = logs  # type: ignore[assignment]
    assert request_limits.METRICS_REPORT_BODY == 1024 * 1024
    for route in ("training_metrics", "validation_metrics", "metrics"):
        answer = _report(master, f"trials/{trial}/{route}", 2 * 1024 * 1024)
        assert answer.status_code == 413, (route, answer.status_code, answer.text[:300])
        message = answer.json()["detail"]["message"]
        assert "1 MiB allowed for a trial's metrics report" in message and "averages" in message
    assert len(logs.lines) == 3 and all(t == trial and stream == "master" for t, stream, _ in logs.lines)
    assert "a metrics report of 2.0 MiB was refused: at most 1 MiB" in logs.lines[0][2]
    assert logs.lines[0][2].startswith("[master] ")


def test_reports_within_the_limit_and_checkpoint_reports_keep_their_sizes(master: InProcessMaster,
                                                                          trial: int) -> None:
    master.master.log_writer = RecordedLogs()  # type: ignore[assignment]
    answer = _report(master, f"trials/{trial}/validation_metrics", 900 * 1024)
    assert answer.status_code != 413, answer.text[:300]
    assert request_limits.body_limit("POST", f"/api/v1/trials/{trial}/checkpoints")[0] == 16 * 1024 * 1024


def test_another_senders_refused_report_writes_nothing_in_the_trials_log(master: InProcessMaster,
                                                                         trial: int) -> None:
    logs = RecordedLogs()
    master.master.log_writer = logs  # type: ignore[assignment]
    owner = master.session("determined")
    body = json.dumps({"steps_completed": 1, "metrics": {"big": "x" * (2 * 1024 * 1024)}}).encode()
    answer = master.client().post(f"/api/v1/trials/{trial}/training_metrics", content=body,
                                  headers={"Authorization": f"Bearer {owner.token}", "Content-Type": "application/json"})
    assert answer.status_code == 413 and logs.lines == []
