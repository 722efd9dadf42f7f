"""Issue 33, finding 8: a name with U+202E (and other bidi or control characters) was accepted at creation though
PATCH refused it. Every create path now checks a name with the rule its PATCH uses (registry/names.py)."""
from typing import Any, Dict

import pytest

from ._helpers import InProcessMaster
from tests.master._helpers import config, model_def

BAD_NAMES = ["invoice\u202efdp.exe", "two\u2028lines", "bell\x07", "zero\u200bwidth"]


@pytest.fixture
def admin_client(master: InProcessMaster) -> Any:
    client = master.client()
    client.headers["Authorization"] = f"Bearer {master.session('admin').token}"
    return client


def _refused(answer: Any, field: str = "name") -> str:
    assert answer.status_code == 400, answer.text
    problems = answer.json()["detail"]["problems"]
    assert any(p.startswith(f"{field}:") and "contains the character U+" in p for p in problems), problems
    return str(problems)


def _experiment(name: str) -> Dict[str, Any]:
    return {"config": config(name=name), "model_definition": model_def(), "activate": False}


def test_experiment_names_are_checked_at_creation_as_by_patch(admin_client: Any) -> None:
    created = admin_client.post("/api/v1/experiments", json=_experiment("good name/with slash"))
    assert created.status_code == 200, created.text
    for bad in BAD_NAMES:
        _refused(admin_client.post("/api/v1/experiments", json=_experiment(bad)))
        unmanaged = {"config": {"name": bad, "searcher": {"name": "single", "metric": "loss"}}, "unmanaged": True}
        _refused(admin_client.post("/api/v1/experiments", json=unmanaged))
        # the rule PATCH applies to the same name
        _refused(admin_client.patch(f"/api/v1/experiments/{created.json()['experiment']['id']}", json={"name": bad}))


def test_a_templates_config_name_is_checked_like_an_experiments(admin_client: Any) -> None:
    _refused(admin_client.post("/api/v1/templates", json={"name": "t", "config": {"name": BAD_NAMES[0]}}))
    assert admin_client.post("/api/v1/templates", json={"name": "t", "config": {"name": "fine"}}).status_code == 200
    _refused(admin_client.put("/api/v1/templates/t", json={"config": {"name": BAD_NAMES[0]}}))


@pytest.mark.parametrize("path, body", [
    ("/api/v1/workspaces", {"name": BAD_NAMES[0]}),
    ("/api/v1/workspaces/1/projects", {"name": BAD_NAMES[0]}),
    ("/api/v1/templates", {"name": BAD_NAMES[0], "config": {}}),
    (f"/api/v1/models/{BAD_NAMES[0]}", {}),
])
def test_the_other_create_paths_refuse_them_too(admin_client: Any, path: str, body: Dict[str, Any]) -> None:
    _refused(admin_client.post(path, json=body))


def test_usernames_keep_their_stricter_rule(admin_client: Any) -> None:
    answer = admin_client.post("/api/v1/users", json={"username": BAD_NAMES[0]})
    assert answer.status_code == 400 and "username:" in answer.text
