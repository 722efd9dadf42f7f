"""Issue 33, finding 3: templates must not hand their secrets to anyone.

`POST /api/v1/experiments` with another user's `template` gave the caller's trials that template's S3
`secret_key` and `data.secrets` (the stored, unredacted config is what a trial gets). A template is applied only
for who may read all of it: its owner, an admin, or anyone when it holds no secret.
"""
from typing import Any, Dict

import pytest

from determined import errors
from determined.common.api import Session

from ._helpers import InProcessMaster, add_user
from tests.master._helpers import config, model_def

_SECRET_TEMPLATE = {
    "checkpoint_storage": {"type": "s3", "bucket": "alice-bucket", "access_key": "AKIAALICE",
                           "secret_key": "alice-s3-secret"},
    "data": {"secrets": {"hf_token": "alice-hf-token"}, "path": "/data"},
}


def _experiment_body(template: str) -> Dict[str, Any]:
    return {"config": config(), "model_definition": model_def(), "activate": False, "template": template}


def _stored_config(master: InProcessMaster, experiment_id: int) -> Dict[str, Any]:
    with master.master.read() as s:
        from determined.master.db import Experiment

        return dict(s.get(Experiment, experiment_id).config)


@pytest.fixture
def sessions(master: InProcessMaster) -> Dict[str, Session]:
    admin = master.session("admin")
    add_user(admin, "alice", "alice-pw")
    add_user(admin, "bob", "bob-pw")
    alice = master.session("alice", "alice-pw")
    alice.post("/templates", {"name": "alice-s3", "config": _SECRET_TEMPLATE})
    alice.post("/templates", {"name": "alice-plain", "config": {"max_restarts": 7, "data": {"path": "/data"}}})
    return {"admin": admin, "alice": alice, "bob": master.session("bob", "bob-pw")}


def test_another_users_template_with_secrets_is_refused_at_submit(master: InProcessMaster,
                                                                   sessions: Dict[str, Session]) -> None:
    with pytest.raises(errors.APIError) as info:
        sessions["bob"].post("/experiments", _experiment_body("alice-s3"))
    assert info.value.status_code == 403
    message = str(info.value)
    assert "alice-s3" in message and "'alice'" in message and "checkpoint_storage.secret_key" in message
    assert "alice-s3-secret" not in message and "alice-hf-token" not in message
    # nothing was stored for bob
    with master.master.read() as s:
        from determined.master.db import Experiment

        assert [e.owner for e in s.query(Experiment).all()] == []


def test_owner_and_admin_apply_it_others_apply_a_template_without_secrets(master: InProcessMaster,
                                                                          sessions: Dict[str, Session]) -> None:
    own = sessions["alice"].post("/experiments", _experiment_body("alice-s3"))["experiment"]
    assert _stored_config(master, own["id"])["data"]["secrets"] == {"hf_token": "alice-hf-token"}
    by_admin = sessions["admin"].post("/experiments", _experiment_body("alice-s3"))["experiment"]
    assert _stored_config(master, by_admin["id"])["checkpoint_storage"]["secret_key"] == "alice-s3-secret"
    shared = sessions["bob"].post("/experiments", _experiment_body("alice-plain"))["experiment"]
    assert _stored_config(master, shared["id"])["max_restarts"] == 2  # the config's own value wins
    assert _stored_config(master, shared["id"])["data"] == {"path": "/data"}


def test_unmanaged_experiments_apply_the_same_rule(sessions: Dict[str, Session]) -> None:
    body = {"config": {"name": "run", "searcher": {"name": "single", "metric": "loss"}}, "unmanaged": True,
            "template": "alice-s3"}
    with pytest.raises(errors.APIError) as info:
        sessions["bob"].post("/experiments", body)
    assert info.value.status_code == 403 and "alice-s3" in str(info.value)


def test_describe_and_list_hide_the_secrets_from_everyone(sessions: Dict[str, Session]) -> None:
    for who in ("bob", "alice", "admin"):
        shown = sessions[who].get("/templates/alice-s3")["template"]["config"]
        assert shown["checkpoint_storage"]["secret_key"] == "********"
        assert shown["data"]["secrets"] == {"hf_token": "********"}
        listed = {t["name"]: t for t in sessions[who].get("/templates")["templates"]}
        assert "alice-s3-secret" not in str(listed) and "alice-hf-token" not in str(listed)
