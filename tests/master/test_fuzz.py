"""Schemathesis over the master's OpenAPI document, in-process and authenticated: no route answers 500."""
import collections
import os
import pathlib
import warnings
from typing import Any, Dict, Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from determined.common.api import Session
from determined.master.lifecycle import allocations
from determined.master.security import auth
from determined.master import create_app
from determined.master.db import Trial, User

from ._helpers import config, model_def

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

MAX_EXAMPLES = int(os.environ.get("DET_FUZZ_EXAMPLES", "12"))


def _populate(app: Any) -> None:
    """An experiment with metrics, a checkpoint, a registered model, and a second user: something to find."""
    session = Session("http://in-process", client=TestClient(app, base_url="http://in-process"), user="admin")
    exp = session.post("/experiments", {"config": config(max_trials=2), "model_definition": model_def()})["experiment"]
    trial_id = session.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    with app.state.master.write() as s:
        allocations.start_allocation(s, s.get(Trial, trial_id))
    session.post(f"/trials/{trial_id}/training_metrics", {"steps_completed": 5, "metrics": {"loss": 1.0}})
    session.post(f"/trials/{trial_id}/validation_metrics", {"steps_completed": 5, "metrics": {"loss": 0.5}})
    session.post(f"/trials/{trial_id}/checkpoints", {"uuid": "6b1f0c9e-2a47-4d3b-9c8e-1f2a3b4c5d6e", "steps_completed": 5, "resources": {"a": 1},
                                                     "framework": "", "format": "", "metadata": {}})
    session.post("/models/m1", {"description": "d", "metadata": {}})
    session.post("/models/m1/versions", {"checkpoint_uuid": "6b1f0c9e-2a47-4d3b-9c8e-1f2a3b4c5d6e"})
    session.post("/users", {"username": "other", "password": "pw"})
    session.close()


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    app = create_app(pathlib.Path(tmp_path_factory.mktemp("fuzz")) / "data", run_scheduler=False)
    with app.state.master.write() as s:  # a second admin that fuzzed requests cannot lock out of itself
        s.add(User(username="fuzzer", password_hash="", admin=True, active=True))
    _populate(app)
    yield app


def _fresh_token(app: Any) -> str:
    """A new token of `fuzzer` for every case: a fuzzed logout or password change cannot end the run."""
    with app.state.master.write() as s:
        user = s.query(User).filter(User.username == "fuzzer").one()
        token, _ = auth.issue_token(s, user)
    return token


def test_no_route_answers_500(fuzz_app: Any) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    labels = []
    statuses: "collections.Counter[int]" = collections.Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case: Any) -> None:
            headers: Dict[str, str] = {"Authorization": f"Bearer {_fresh_token(fuzz_app)}"}
            response = case.call_and_validate(headers=headers, checks=[not_a_server_error])
            statuses[response.status_code // 100 * 100] += 1

        fuzz()
    assert "POST /api/v1/auth/login" in labels and "POST /api/v1/experiments" in labels and len(labels) > 25
    print(f"fuzzed {len(labels)} operations: responses by class {dict(sorted(statuses.items()))}")
    assert statuses[200] > 0 and statuses[400] > 0 and set(statuses) <= {200, 400}
