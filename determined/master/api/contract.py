"""The contract between the routes and their models, checked where it matters.

`invalid_request` turns every validation error (a body, a path or query parameter) into the one error shape of
the API, `{"detail": {"message", "problems"}}` with status 400, in the words of the master's own checks.
`openapi` writes the document from the route table with that error shape in place of FastAPI's 422.
`AnswerContract` (on when `DET_API_CONTRACT` is set, as in the test suite) validates every JSON answer against
its route's response model and turns a mismatch, an undeclared field above all, into a 500 that names it.
"""
import gzip
import json
import os
import typing
from typing import Any, Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from determined.master.api.schemas._base import ERROR_RESPONSES, ErrorAnswer
from determined.master.security import request_limits

CONTRACT_ENV = "DET_API_CONTRACT"


def _where(loc: Any) -> str:
    parts = [str(x)[:100] for x in list(loc or ())[:10]]
    if parts and parts[0] in ("body", "query", "path"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def _body_fields(request: Request) -> List[str]:
    route = request.scope.get("route")
    field = getattr(route, "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    for model in (annotation, *typing.get_args(annotation)):  # a body that may be absent is Optional[Model]
        if isinstance(model, type) and issubclass(model, BaseModel):
            return sorted(model.model_fields)
    return []


def problems_of(request: Request, errors: List[Dict[str, Any]]) -> List[str]:
    problems = []
    for e in errors[:request_limits.MAX_ERROR_PROBLEMS]:
        where, kind = _where(e.get("loc")), str(e.get("type", ""))
        if kind == "extra_forbidden":
            allowed = _body_fields(request) if len(e.get("loc") or ()) == 2 else []
            problems.append(f"{where}: unknown field" + (f"; allowed: {', '.join(allowed)}" if allowed else ""))
        elif kind == "missing":
            problems.append(f"{where}: required")
        elif kind == "json_invalid":
            problems.append(f"body: not valid JSON ({request_limits.clip(str(e.get('msg', '')), 200)})")
        else:
            problems.append(f"{where}: {request_limits.clip(str(e.get('msg', '')), 300)}")
    return problems


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A request the route's models refuse: 400 in the API's one error shape, never echoing the input."""
    errors = list(exc.errors()) if isinstance(exc, RequestValidationError) else []
    return JSONResponse(status_code=400, content={"detail": {
        "message": f"invalid request to {request.method} {request.url.path[:200]}",
        "problems": problems_of(request, errors)}})


def openapi(app: FastAPI) -> Dict[str, Any]:
    """The OpenAPI document of `app`: every route's models, and ErrorAnswer for each refusal (no 422: validation
    errors are the master's 400)."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, routes=app.routes,
                      description="The REST API of the master. Every route under /api/v1 but login and master/info "
                                  "needs `Authorization: Bearer <token>`.")
    doc.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorAnswer.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in error_schema.pop("$defs", {}).items():
        doc["components"]["schemas"][name] = sub
    doc["components"]["schemas"]["ErrorAnswer"] = error_schema
    for name in ("HTTPValidationError", "ValidationError"):
        doc["components"]["schemas"].pop(name, None)
    for item in doc.get("paths", {}).values():
        for op in item.values():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            for code, spec in ERROR_RESPONSES.items():
                responses.setdefault(str(code), {"description": spec["description"], "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorAnswer"}}}})
    app.openapi_schema = doc
    return doc


def document(app: FastAPI) -> str:
    """The OpenAPI document as checked into the repository (docs/openapi.json): sorted keys, two-space indent."""
    return json.dumps(openapi(app), indent=2, sort_keys=True) + "\n"


def contract_checked() -> bool:
    return bool(os.environ.get(CONTRACT_ENV))


class AnswerContract:
    """ASGI middleware: each JSON answer (2xx) of a route with a response model is validated against that model
    (a gzipped one after decompressing it); an answer that does not match (a field the model does not declare, a
    wrong type) becomes a 500 naming the route and the problems. For tests: it holds each answer in memory once
    more."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._adapters: Dict[int, TypeAdapter[Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Optional[Message] = None
        chunks: List[bytes] = []
        passthrough = False

        async def capture(message: Message) -> None:
            nonlocal start, passthrough
            if passthrough:
                await send(message)
                return
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                is_json = headers.get(b"content-type", b"").startswith(b"application/json")
                if not (is_json and 200 <= message["status"] < 300 and self._model(scope) is not None):
                    passthrough = True
                    await send(message)
                    return
                start = message
                encoding = headers.get(b"content-encoding", b"")
                if encoding not in (b"", b"identity", b"gzip"):
                    passthrough = True
                    await send(message)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                body = b"".join(chunks)
                gzipped = dict(start.get("headers") or []).get(b"content-encoding") == b"gzip" if start else False
                problem = self._check(scope, gzip.decompress(body) if gzipped else body)
                if problem is not None:
                    body = json.dumps({"detail": {"message": problem[0], "problems": problem[1]}}).encode()
                    assert start is not None
                    start = {**start, "status": 500, "headers": [
                        (k, v) for k, v in start.get("headers", [])
                        if k.lower() not in (b"content-length", b"content-encoding")]
                        + [(b"content-length", str(len(body)).encode())]}
                assert start is not None
                await send(start)
                await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)

    @staticmethod
    def _model(scope: Scope) -> Any:
        route = scope.get("route")
        return route.response_model if isinstance(route, APIRoute) else None

    def _check(self, scope: Scope, body: bytes) -> Optional[tuple]:
        route = scope["route"]
        adapter = self._adapters.get(id(route))
        if adapter is None:
            adapter = self._adapters[id(route)] = TypeAdapter(route.response_model)
        try:
            # parsed by json first: pydantic's own JSON parser stops at ~200 levels, a stored config may hold more
            adapter.validate_python(json.loads(body))
        except ValidationError as e:
            where = f"{scope.get('method')} {scope.get('path')}"
            return (f"the answer of {where} does not match its model {getattr(route.response_model, '__name__', '')}",
                    [f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()[:20]])
        return None
