"""Limits on what a request may store: JSON depth and sizes, names, bounded errors; one bad row never breaks a list.

In-process (the limits are the app's own middleware and checks); on SQLite, and on PostgreSQL with DET_TEST_DB.
"""
import json
from typing import Any, Dict, List
from urllib.parse import quote

import pytest

from determined import errors
from determined.common.api import Session
from determined.master.security import request_limits
from determined.master.db import Experiment

from ._helpers import InProcessMaster, create_experiment
from tests.master._helpers import config, model_def


def nested(depth: int, leaf: Any = 1) -> Any:
    """`{"a": {"a": ... leaf}}` with `depth` objects."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def url_part(name: str) -> str:
    """`name` as one path segment (dots too: a client would otherwise resolve `..`)."""
    return quote(name, safe="").replace(".", "%2E")


def refused(status: int, call: Any, *args: Any, **kwargs: Any) -> errors.APIError:
    with pytest.raises(errors.APIError) as info:
        call(*args, **kwargs)
    assert info.value.status_code == status, str(info.value)
    return info.value


def text_of(error: errors.APIError) -> str:
    return error.message + " " + " ".join(error.problems)


def raw_post(session: Session, path: str, body: bytes, headers: Dict[str, str]) -> Any:
    return session._client.post(path, content=body, headers={**session._headers(), **headers})


@pytest.fixture
def user(master: InProcessMaster) -> Session:
    return master.session("determined")


def stored_counts(master: InProcessMaster) -> Dict[str, int]:
    from sqlalchemy import func, select

    from determined.master.db import Model

    with master.master.read() as s:
        return {"experiments": s.scalar(select(func.count()).select_from(Experiment)) or 0,
                "models": s.scalar(select(func.count()).select_from(Model)) or 0}


def test_json_nested_too_deep_is_refused_before_anything_is_stored(master: InProcessMaster, user: Session) -> None:
    limit = request_limits.MAX_JSON_DEPTH
    exp = create_experiment(user, max_trials=1)
    user.post("/models/kept", {"description": "mine", "metadata": {"team": "a"}})
    before = stored_counts(master)

    # the attacks: a `data:` 500 levels deep, model metadata 600 deep
    cfg = config(max_trials=1, data=nested(500))
    err = refused(400, user.post, "/experiments", {"config": cfg, "model_definition": model_def()})
    assert "config.data.a.a…" in text_of(err) and f"at most {limit} levels" in text_of(err)
    err = refused(400, user.post, "/models/deep", {"description": "", "metadata": nested(600)})
    assert "metadata.a.a.a…" in text_of(err)
    err = refused(400, user.patch, "/models/kept", {"metadata": nested(600)})
    trial_id = user.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    refused(400, user.post, f"/trials/{trial_id}/training_metrics",
            {"steps_completed": 1, "metrics": {"loss": 1.0}, "batch_metrics": [nested(100)]})
    # far deeper than Python's recursion limit: still a clear 400, not a 500
    deep_text = b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = raw_post(user, "/api/v1/models/deeper", deep_text, {"content-type": "application/json"})
    assert answer.status_code == 400 and f"at most {limit} levels" in answer.text
    assert stored_counts(master) == before
    assert user.get("/models/kept")["model"]["metadata"] == {"team": "a"}

    # as deep as allowed is fine, and reads back whole (the body adds `metadata` and the model answer two levels)
    ok = nested(limit - 1)
    assert user.post("/models/deep-enough", {"metadata": ok})["model"]["metadata"] == ok
    assert [m["name"] for m in user.get("/models")["models"]] == ["deep-enough", "kept"]


def test_sizes_and_names_are_bounded_with_errors_that_say_what_is_allowed(master: InProcessMaster, user: Session) -> None:
    before = stored_counts(master)
    for name in ("..", ".", " ", "a\0b", "a\bb", "a\\b", " lead", "trail ", "\u202eevil", "x" * 257):
        err = refused(400, user.post, f"/models/{url_part(name)}", {})
        assert "allowed: 1 to 256 characters without control characters, '/' or '\\'" in text_of(err), name
    for ok in ("résumé model-1", "a.b", "..x", "CNN (v2)"):
        assert user.post(f"/models/{url_part(ok)}", {})["model"]["name"] == ok
    err = refused(400, user.post, "/models/big", {"metadata": {"blob": "x" * (600 * 1024)}})
    assert "at most 524288 are allowed" in text_of(err)
    err = refused(400, user.post, "/models/long", {"description": "d" * 20_000})
    assert "at most 16384" in text_of(err)

    base = {"model_definition": model_def()}
    bad_configs: List[Dict[str, Any]] = [
        config(max_trials=1, labels=["ok", "bad\x1b[31m"]),
        config(max_trials=1, labels=[" "]),
        config(max_trials=1, labels=[f"l{i}" for i in range(101)]),
        config(max_trials=1, description="d" * 20_000),
        config(max_trials=1, data={"rows": ["x" * 1000] * 1100}),
    ]
    expected = ["labels[1]", "labels[0]", "101 labels", "16384", "bytes of JSON; at most 1048576"]
    for cfg, what in zip(bad_configs, expected):
        err = refused(400, user.post, "/experiments", {**base, "config": cfg})
        assert what in text_of(err), (what, text_of(err))
    exp = create_experiment(user, max_trials=1)
    trial_id = user.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    err = refused(400, user.post, f"/trials/{trial_id}/validation_metrics",
                  {"steps_completed": 1, "metrics": {"loss": 1.0, "evil\x1b]0;x\x07": 2.0}})
    assert "control characters" in text_of(err)
    after = stored_counts(master)
    assert after == {"experiments": before["experiments"] + 1, "models": before["models"] + 4}
    assert user.get(f"/trials/{trial_id}")["validation_metrics"] == []


def test_bodies_over_the_route_limit_are_refused_and_errors_never_echo_big_input(user: Session) -> None:
    login = raw_post(user, "/api/v1/auth/login", b"{}", {"content-type": "application/json",
                                                         "content-length": str(300 * 1024 * 1024)})
    assert login.status_code == 413 and "16 KiB allowed for a login" in login.text
    assert login.headers.get("connection") == "close"
    big = json.dumps({"description": "x" * (2 * 1024 * 1024)}).encode()
    answer = raw_post(user, "/api/v1/models/m", big, {"content-type": "application/json"})
    assert answer.status_code == 413 and "1 MiB allowed" in answer.text
    # a 400 or 422 quotes at most a few hundred characters of what it was sent
    for path, body in [("/api/v1/experiments", ["y" * 500_000]),
                       ("/api/v1/models/m", {"description": 5, "metadata": "z" * 500_000}),
                       ("/api/v1/users", {"username": "u" * 500_000})]:
        answer = raw_post(user, path, json.dumps(body).encode(), {"content-type": "application/json"})
        assert answer.status_code in (400, 403, 422) and len(answer.content) < 5000, (path, len(answer.content))


def test_a_row_that_cannot_be_shown_is_left_out_of_lists_not_a_500(master: InProcessMaster, user: Session) -> None:
    good = create_experiment(user, max_trials=1)
    deep = create_experiment(user, max_trials=1)
    broken = create_experiment(user, max_trials=1)
    with master.master.write() as s:  # as an older master stored them, before the limits
        s.get(Experiment, deep["id"]).config = {**s.get(Experiment, deep["id"]).config, "data": nested(600)}
        s.get(Experiment, broken["id"]).config = {"entrypoint": "model:T"}  # no searcher: cannot be rendered
    listed = user.get("/experiments")
    assert [e["id"] for e in listed["experiments"]] == [good["id"], deep["id"]]
    assert [o["id"] for o in listed["omitted"]] == [broken["id"]]
    assert user.get(f"/experiments/{deep['id']}")["experiment"]["id"] == deep["id"]
    err = refused(500, user.get, f"/experiments/{broken['id']}")
    assert f"experiment {broken['id']} holds a stored value that cannot be shown" in err.message
