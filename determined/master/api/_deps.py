"""Shared pieces of the routers: the Master of the app, bearer tokens, turning problems into HTTP errors."""
import contextlib
from typing import Iterator, Optional

from fastapi import HTTPException, Request

from determined.master.master import Master
from determined.master.problems import RequestProblem


def master_of(request: Request) -> Master:
    return request.app.state.master  # type: ignore[no-any-return]


def bearer_token(request: Request) -> Optional[str]:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def http_error(problem: RequestProblem) -> HTTPException:
    return HTTPException(status_code=problem.status, detail={"message": problem.message, "problems": problem.problems})


@contextlib.contextmanager
def problems_as_http() -> Iterator[None]:
    try:
        yield
    except RequestProblem as e:
        raise http_error(e) from None
