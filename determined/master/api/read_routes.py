"""The read table (determined/master/views/read_table.py) as GET routes of the app: one route per entry, its path
and query parameters typed and bounded from the entry, its answer model named by the entry, answered by the
entry's reader inside a read transaction (lists and objects encoded once, as the other routes do)."""
import importlib
import inspect
from typing import Any, List, Optional

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from determined.master.api._deps import json_list, json_response, master_of, problems_as_http
from determined.master.views import read_table
from determined.master.views.dbread import reader_of

_KINDS = {"int": int, "str": str, "strs": Optional[List[str]]}


def _model(name: str) -> Any:
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(f"determined.master.api.schemas.{module}"), attr)


def _endpoint(route: read_table.Read) -> Any:
    def endpoint(request: Request, **args: Any) -> Response:
        with problems_as_http(), master_of(request).read() as s:
            if route.listing:
                return json_list(*route.read(reader_of(s), **args))
            return json_response(lambda: route.read(reader_of(s), **args), route.what.format(**args))

    params = [inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)]
    for name in route.path_params:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=int if name in route.ints else str))
    for p in route.query:
        annotation = _KINDS[p.kind] if p.required or p.default is not None or p.kind == "strs" else Optional[str]
        default = Query(... if p.required else p.default, ge=p.ge, le=p.le, max_length=p.max_length)
        params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                        default=default))
    endpoint.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    endpoint.__name__ = route.name
    endpoint.__doc__ = route.doc
    return endpoint


def router() -> APIRouter:
    """Every entry of the read table as a GET route (paths under the API prefix given by the route table)."""
    r = APIRouter()
    for route in read_table.READS:
        r.add_api_route(route.path, _endpoint(route), methods=["GET"], response_model=_model(route.answer),
                        name=route.name)
    return r
