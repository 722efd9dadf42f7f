"""Config template routes (`det template`): create, list, describe, replace the config, remove."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, Request
from sqlalchemy.exc import IntegrityError

from determined.master.security import auth
from determined.master.registry import templates
from determined.master.api._deps import http_error, master_of, problems_as_http
from determined.master.api.schemas._base import Empty, fields_of
from determined.master.api.schemas.templates import (CreateTemplateBody, SetTemplateBody, TemplateAnswer)
from determined.master.problems import RequestProblem

router = APIRouter()


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


@router.post("/templates", response_model=TemplateAnswer)
def create_template(request: Request, body: Optional[CreateTemplateBody] = None) -> Dict[str, Any]:
    """`{"name", "config"}` (config: a mapping or its YAML text); 409 when the name is taken."""
    try:
        with problems_as_http(), master_of(request).write() as s:
            return {"template": templates.to_json(templates.create(s, _fields(body), auth.principal_of(request)))}
    except IntegrityError:  # another request took the name between the check and the insert
        raise http_error(RequestProblem(409, "a template of that name was created meanwhile; choose another")) from None


@router.put("/templates/{name}", response_model=TemplateAnswer)
def set_template(request: Request, name: str, body: Optional[SetTemplateBody] = None) -> Dict[str, Any]:
    """Replace the template's config (its owner or an admin)."""
    with problems_as_http(), master_of(request).write() as s:
        return {"template": templates.to_json(templates.set_config(s, name, _fields(body), auth.principal_of(request)))}


@router.delete("/templates/{name}", response_model=Empty)
def remove_template(request: Request, name: str) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).write() as s:
        templates.remove(s, name, auth.principal_of(request))
    return {}
