"""What every model of the API shares: exactly the declared fields, and the one error shape of every route."""
from typing import Any, Dict, List, Type, TypeVar

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound=BaseModel)


class Wire(BaseModel):
    """A JSON object of the API: the fields it declares and no others (an unknown field in a request is refused
    with the master's 400; an undeclared field in an answer fails the contract check)."""

    model_config = ConfigDict(extra="forbid")


class StrictWire(Wire):
    """A request body, checked without coercion: `"5"` is no integer and `1` no boolean, as the routes' own
    checks were before the models (a request must say what it means)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Open(BaseModel):
    """A JSON object whose keys are the user's (metadata, hyperparameters, metrics, a config): any fields."""

    model_config = ConfigDict(extra="allow")


class ProblemDetail(Wire):
    message: str
    problems: List[str] = []


class ErrorAnswer(Wire):
    """Every refusal: `{"detail": {"message": ..., "problems": [...]}}` (a problem names a field and the fix)."""

    detail: ProblemDetail


class Empty(Wire):
    """An answer with no fields: `{}`."""


def fields_of(body: BaseModel) -> Dict[str, Any]:
    """The request body as the JSON object the client sent: only the fields it set (a PATCH keeps absent ones)."""
    return body.model_dump(exclude_unset=True)


ERROR_RESPONSES: Dict[int | str, Dict[str, Any]] = {
    code: {"model": ErrorAnswer, "description": text} for code, text in (
        (400, "The request is invalid; `problems` name each field and the fix."),
        (401, "No valid token (log in: `det user login`)."),
        (403, "The caller may not do this."),
        (404, "No such object."),
        (409, "The object's state does not allow it now."),
    )
}


def model_name(model: Type[BaseModel]) -> str:
    return model.__name__
