"""Config template routes (`det template`): create, list, describe, replace the config, remove."""
from typing import Any, Dict

from fastapi import APIRouter, Body, Request
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.views import reads
from determined.master.registry import templates
from determined.master.api._deps import http_error, master_of, problems_as_http
from determined.master.views.dbread import reader_of
from determined.master.problems import RequestProblem

router = APIRouter()


@router.get("/templates")
def list_templates(request: Request) -> Dict[str, Any]:
    with master_of(request).read() as s:
        return reads.templates(reader_of(s))


@router.post("/templates")
def create_template(request: Request, body: Any = Body(None)) -> Dict[str, Any]:
    """`{"name", "config"}` (config: a mapping or its YAML text); 409 when the name is taken."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            return {"template": templates.to_json(templates.create(s, body, auth.principal_of(request)))}
    except IntegrityError:  # another request took the name between the check and the insert
        raise http_error(RequestProblem(409, "a template of that name was created meanwhile; choose another")) from None


@router.get("/templates/{name}")
def get_template(request: Request, name: str) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return reads.template(reader_of(s), name)


@router.put("/templates/{name}")
def set_template(request: Request, name: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Replace the template's config (its owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        return {"template": templates.to_json(templates.set_config(s, name, body, auth.principal_of(request)))}


@router.delete("/templates/{name}")
def remove_template(request: Request, name: str) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        templates.remove(s, name, auth.principal_of(request))
    return {}
