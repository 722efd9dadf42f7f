"""The typed contract of the REST API: every route has models, answers match them, the document is checked in."""
import pathlib
from typing import Any, Dict, List

import pytest

from determined.master import create_app
from determined.master.api import contract, export_openapi
from determined.master.api.schemas._base import Wire

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def app(tmp_path_factory: Any) -> Any:
    return create_app(tmp_path_factory.mktemp("contract"), run_scheduler=False)


def _client(app: Any) -> Any:
    """An in-process client logged in as admin (blank password, as a new data dir has)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    client = TestClient(app, base_url="http://in-process")
    token = client.post("/api/v1/auth/login", json={"username": "admin", "password": ""}).json()["token"]
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def _operations(app: Any) -> List[Any]:
    doc = contract.openapi(app)
    return [(method.upper(), path, op) for path, item in doc["paths"].items() if path.startswith("/api/")
            for method, op in item.items()]


def _named(schema: Dict[str, Any]) -> bool:
    """A schema that is a named model (a $ref), or a list or union of them: not a bare `object`."""
    if "$ref" in schema:
        return True
    if schema.get("type") == "array":
        return _named(schema.get("items", {}))
    options = schema.get("anyOf") or schema.get("oneOf")
    return bool(options) and all(_named(o) or o.get("type") == "null" for o in options)


def test_every_json_answer_is_a_named_model(app: Any) -> None:
    untyped = []
    for method, path, op in _operations(app):
        for code, response in op["responses"].items():
            if not code.startswith("2"):
                continue
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            if schema is not None and not _named(schema):
                untyped.append(f"{method} {path}")
    assert not untyped, f"{len(untyped)} answers without a model: {untyped}"


def test_every_request_body_is_a_named_model(app: Any) -> None:
    untyped = []
    for method, path, op in _operations(app):
        content = op.get("requestBody", {}).get("content", {})
        for media, spec in content.items():
            if media == "application/json" and not _named(spec.get("schema", {})):
                untyped.append(f"{method} {path}")
    assert not untyped, f"{len(untyped)} request bodies without a model: {untyped}"


def test_no_route_answers_fastapi_s_422(app: Any) -> None:
    assert not [(m, p) for m, p, op in _operations(app) if "422" in op["responses"]]


def test_the_checked_in_document_is_the_generated_one(app: Any) -> None:
    assert DOC.exists(), "docs/openapi.json is missing: python -m determined.master.api.export_openapi docs/openapi.json"
    assert DOC.read_text() == contract.document(app), (
        "docs/openapi.json is out of date: python -m determined.master.api.export_openapi docs/openapi.json")


def test_an_answer_with_an_undeclared_field_fails_the_contract(tmp_path: Any, monkeypatch: Any) -> None:
    """The check can fail: a route whose answer carries a field its model does not declare answers 500."""

    class Declared(Wire):
        id: int

    monkeypatch.setenv(contract.CONTRACT_ENV, "1")
    app = create_app(tmp_path, run_scheduler=False)

    @app.get("/api/v1/contract-probe", response_model=Declared)
    def probe() -> Dict[str, Any]:
        return {"id": 1, "secret": "not in the model"}

    @app.get("/api/v1/contract-probe-ok", response_model=Declared)
    def probe_ok() -> Dict[str, Any]:
        return {"id": 1}

    # FastAPI filters a dict answer through its response model; a route that writes its own JSON is not filtered
    from fastapi.responses import Response

    @app.get("/api/v1/contract-probe-raw", response_model=Declared)
    def probe_raw() -> Response:
        return Response(b'{"id": 1, "secret": "x"}', media_type="application/json")

    client = _client(app)
    assert client.get("/api/v1/contract-probe-ok").json() == {"id": 1}
    answer = client.get("/api/v1/contract-probe-raw")
    assert answer.status_code == 500
    assert "does not match its model" in answer.json()["detail"]["message"]
    assert any("secret" in p for p in answer.json()["detail"]["problems"])


def test_a_gzipped_answer_is_checked_too(tmp_path: Any, monkeypatch: Any) -> None:
    """Large answers go out gzipped (the learning curves): the check reads them decompressed, and a good one
    reaches the client intact."""
    import gzip

    from fastapi.responses import Response

    class Declared(Wire):
        id: int

    monkeypatch.setenv(contract.CONTRACT_ENV, "1")
    app = create_app(tmp_path, run_scheduler=False)

    @app.get("/api/v1/gz-good", response_model=Declared)
    def good() -> Response:
        return Response(gzip.compress(b'{"id": 1}'), media_type="application/json", headers={"Content-Encoding": "gzip"})

    @app.get("/api/v1/gz-bad", response_model=Declared)
    def bad() -> Response:
        return Response(gzip.compress(b'{"id": 1, "extra": 2}'), media_type="application/json",
                        headers={"Content-Encoding": "gzip"})

    client = _client(app)
    assert client.get("/api/v1/gz-good").json() == {"id": 1}
    answer = client.get("/api/v1/gz-bad")
    assert answer.status_code == 500 and any("extra" in p for p in answer.json()["detail"]["problems"])


def test_an_unknown_field_names_the_allowed_ones(tmp_path: Any) -> None:
    """A body that may be absent (Optional[Model]) still lists its fields when one is unknown."""
    client = _client(create_app(tmp_path, run_scheduler=False))
    answer = client.post("/api/v1/workspaces", json={"name": "w", "nope": 1})
    assert answer.status_code == 400
    problems = answer.json()["detail"]["problems"]
    assert any(p.startswith("nope: unknown field; allowed: ") and "name" in p for p in problems), problems


def test_a_validation_error_has_the_one_error_shape(tmp_path: Any) -> None:
    answer = _client(create_app(tmp_path, run_scheduler=False)).get("/api/v1/experiments/not-a-number")
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert set(detail) == {"message", "problems"} and detail["problems"] == [
        p for p in detail["problems"] if p.startswith("experiment_id: ")]


def test_export_writes_the_document(tmp_path: Any) -> None:
    out = tmp_path / "openapi.json"
    assert export_openapi.main([str(out)]) == 0
    assert '"openapi"' in out.read_text()
