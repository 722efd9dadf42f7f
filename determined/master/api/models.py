"""Model registry routes: create, list, describe and update models; list, get and register versions."""
from typing import Any, Dict

from typing import Optional

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.views import reads, serialize
from determined.master.registry import model_registry, trial_sources
from determined.master.api._deps import http_error, json_list, json_response, master_of, problems_as_http
from determined.master.views.dbread import reader_of
from determined.master.problems import RequestProblem

router = APIRouter()


@router.get("/models")
def list_models(request: Request, sort_by: str = "name", order_by: str = "asc", name: str = "",
                description: str = "") -> Response:
    """`{"models": [<model>...]}`; a model that cannot be shown is left out and named in `omitted`."""
    with problems_as_http(), master_of(request).read() as s:
        return json_list(*reads.models(reader_of(s), sort_by, order_by, name, description))


@router.post("/models/{name}")
def create_model(request: Request, name: str, body: Any = Body(None)) -> Dict[str, Any]:
    try:
        with problems_as_http(), master_of(request).write() as s:
            return {"model": serialize.model(s, model_registry.create_model(s, name, body, auth.principal_of(request)))}
    except IntegrityError:  # another process created the name between the check and the insert
        raise http_error(RequestProblem(409, f"model {name!r} already exists; choose another name")) from None


@router.get("/models/{name}")
def get_model(request: Request, name: str) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: reads.model(reader_of(s), name), f"model {name!r}")


@router.patch("/models/{name}")
def update_model(request: Request, name: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Replace the description and/or the whole metadata object (the owner or an admin); `owner` (admins)."""
    with problems_as_http(), master_of(request).write() as s:
        return {"model": serialize.model(s, model_registry.update_model(s, name, body, auth.principal_of(request)))}


@router.get("/models/{name}/versions")
def list_versions(request: Request, name: str, order_by: str = "desc") -> Response:
    with problems_as_http(), master_of(request).read() as s:
        model = model_registry.get_model(s, name)
        versions = model_registry.versions_of(s, model, order_by)
        return json_list("versions", versions, lambda v: serialize.model_version(s, model, v), lambda v: v.version,
                         extra={"model": serialize.model(s, model)})


@router.get("/models/{name}/versions/{version}")
def get_version(request: Request, name: str, version: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        model = model_registry.get_model(s, name)
        return {"version": serialize.model_version(s, model, model_registry.get_version(s, model, version))}


@router.get("/models/{name}/versions/{version}/metrics")
def version_metrics(request: Request, name: str, version: int, group: Optional[str] = Query(None, max_length=128),
                    kind: Optional[str] = Query(None, max_length=32)) -> Response:
    """`{trial_ids, metrics}`: the metrics of the trials that reported using this model version."""
    with problems_as_http(), master_of(request).read() as s:
        row = model_registry.get_version(s, model_registry.get_model(s, name), version)
        return json_response(lambda: trial_sources.model_version_metrics(reader_of(s), row.id, group, kind),
                             f"the metrics of version {version} of model {name!r}")


@router.post("/models/{name}/versions")
def register_version(request: Request, name: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Register a COMPLETED checkpoint (`{"checkpoint_uuid"}`) as the model's next version (the owner or an admin)."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            model = model_registry.get_model(s, name)
            version = model_registry.register_version(s, model, body, auth.principal_of(request))
            return {"version": serialize.model_version(s, model, version)}
    except IntegrityError:  # a concurrent registration took the same version number
        raise http_error(RequestProblem(409, f"model {name!r} changed during the registration; try again")) from None


@router.patch("/models/{name}/versions/{version}")
def update_version(request: Request, name: str, version: int, body: Any = Body(None)) -> Dict[str, Any]:
    """Change a version's name, comment, notes or metadata (the model's owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        model = model_registry.get_model(s, name)
        row = model_registry.update_version(s, model, version, body, auth.principal_of(request))
        return {"version": serialize.model_version(s, model, row)}


@router.delete("/models/{name}/versions/{version}")
def delete_version(request: Request, name: str, version: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        model_registry.delete_version(s, model_registry.get_model(s, name), version, auth.principal_of(request))
    return {}


@router.delete("/models/{name}")
def delete_model(request: Request, name: str) -> Dict[str, Any]:
    """Delete a model and its versions; the checkpoints stay (the owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        model_registry.delete_model(s, model_registry.get_model(s, name), auth.principal_of(request))
    return {}
