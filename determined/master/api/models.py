"""Model registry routes: create, list, describe and update models; list, get and register versions."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.views import serialize
from determined.master.registry import model_registry, trial_sources
from determined.master.api._deps import http_error, json_list, json_response, master_of, problems_as_http
from determined.master.api.schemas._base import Empty, fields_of
from determined.master.api.schemas.checkpoints import SourceMetrics
from determined.master.api.schemas.registry import (CreateModelBody, ModelAnswer, ModelVersionAnswer, ModelVersionList,
                                                   RegisterVersionBody, UpdateModelBody, UpdateVersionBody)
from determined.master.views.dbread import reader_of
from determined.master.problems import RequestProblem

router = APIRouter()


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


@router.post("/models/{name}", response_model=ModelAnswer)
def create_model(request: Request, name: str, body: Optional[CreateModelBody] = None) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            model = model_registry.create_model(s, name, _fields(body), auth.principal_of(request))
            return {"model": serialize.model(s, model)}
    except IntegrityError:  # another process created the name between the check and the insert
        raise http_error(RequestProblem(409, f"model {name!r} already exists; choose another name")) from None


@router.patch("/models/{name}", response_model=ModelAnswer)
def update_model(request: Request, name: str, body: Optional[UpdateModelBody] = None) -> Dict[str, Any]:
    """Replace the description and/or the whole metadata object (the owner or an admin); `owner` (admins)."""
    with problems_as_http(), master_of(request).write() as s:
        model = model_registry.update_model(s, name, _fields(body), auth.principal_of(request))
        return {"model": serialize.model(s, model)}


@router.get("/models/{name}/versions", response_model=ModelVersionList)
def list_versions(request: Request, name: str, order_by: str = "desc") -> Response:
    with problems_as_http(), master_of(request).read() as s:
        model = model_registry.get_model(s, name)
        versions = model_registry.versions_of(s, model, order_by)
        return json_list("versions", versions, lambda v: serialize.model_version(s, model, v), lambda v: v.version,
                         extra={"model": serialize.model(s, model)})


@router.get("/models/{name}/versions/{version}", response_model=ModelVersionAnswer)
def get_version(request: Request, name: str, version: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        model = model_registry.get_model(s, name)
        return {"version": serialize.model_version(s, model, model_registry.get_version(s, model, version))}


@router.get("/models/{name}/versions/{version}/metrics", response_model=SourceMetrics)
def version_metrics(request: Request, name: str, version: int, group: Optional[str] = Query(None, max_length=128),
                    kind: Optional[str] = Query(None, max_length=32)) -> Response:
    """`{trial_ids, metrics}`: the metrics of the trials that reported using this model version."""
    with problems_as_http(), master_of(request).read() as s:
        row = model_registry.get_version(s, model_registry.get_model(s, name), version)
        return json_response(lambda: trial_sources.model_version_metrics(reader_of(s), row.id, group, kind),
                             f"the metrics of version {version} of model {name!r}")


@router.post("/models/{name}/versions", response_model=ModelVersionAnswer)
def register_version(request: Request, name: str, body: Optional[RegisterVersionBody] = None) -> Dict[str, Any]:
    """Register a COMPLETED checkpoint (`{"checkpoint_uuid"}`) as the model's next version (the owner or an admin)."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            model = model_registry.get_model(s, name)
            version = model_registry.register_version(s, model, _fields(body), auth.principal_of(request))
            return {"version": serialize.model_version(s, model, version)}
    except IntegrityError:  # a concurrent registration took the same version number
        raise http_error(RequestProblem(409, f"model {name!r} changed during the registration; try again")) from None


@router.patch("/models/{name}/versions/{version}", response_model=ModelVersionAnswer)
def update_version(request: Request, name: str, version: int, body: Optional[UpdateVersionBody] = None
                   ) -> Dict[str, Any]:
    """Change a version's name, comment, notes or metadata (the model's owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        model = model_registry.get_model(s, name)
        row = model_registry.update_version(s, model, version, _fields(body), auth.principal_of(request))
        return {"version": serialize.model_version(s, model, row)}


@router.delete("/models/{name}/versions/{version}", response_model=Empty)
def delete_version(request: Request, name: str, version: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        model_registry.delete_version(s, model_registry.get_model(s, name), version, auth.principal_of(request))
    return {}


@router.delete("/models/{name}", response_model=Empty)
def delete_model(request: Request, name: str) -> Dict[str, Any]:
    """Delete a model and its versions; the checkpoints stay (the owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        model_registry.delete_model(s, model_registry.get_model(s, name), auth.principal_of(request))
    return {}
