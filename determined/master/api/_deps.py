"""Shared pieces of the routers: the Master of the app, bearer tokens, turning problems into HTTP errors, and JSON
answers encoded in one C pass (lists leave out, and log, a stored row that cannot be shown)."""
import contextlib
import json
import logging
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TypeVar

from fastapi import HTTPException, Request
from fastapi.responses import Response

from determined.master.master import Master
from determined.master.problems import RequestProblem
from determined.master.security.request_limits import bounded_detail

logger = logging.getLogger("determined.master")
Row = TypeVar("Row")


def master_of(request: Request) -> Master:
    return request.app.state.master  # type: ignore[no-any-return]


def bearer_token(request: Request) -> Optional[str]:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def http_error(problem: RequestProblem) -> HTTPException:
    message, problems = bounded_detail(problem.message, problem.problems)
    return HTTPException(status_code=problem.status, detail={"message": message, "problems": problems})


@contextlib.contextmanager
def problems_as_http() -> Iterator[None]:
    try:
        yield
    except RequestProblem as e:
        raise http_error(e) from None


def _dumps(value: Any) -> str:
    # As FastAPI's JSONResponse writes it, but without its recursive pre-pass (jsonable_encoder) over the answer.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def json_response(render: Callable[[], Dict[str, Any]], what: str) -> Response:
    """`render()` as a JSON answer; a stored row it cannot render is a 500 that names `what` (and is logged)."""
    try:
        text = _dumps(render())
    except (ValueError, TypeError, RecursionError, KeyError, AttributeError) as e:
        logger.error("%s cannot be shown as JSON: %s: %s", what, e.__class__.__name__, e)
        raise http_error(RequestProblem(500, f"{what} holds a stored value that cannot be shown as JSON "
                                             f"({e.__class__.__name__}); an admin can find it in the master's log"))
    return Response(text.encode("utf-8"), media_type="application/json")


def json_list(key: str, rows: Iterable[Row], render: Callable[[Row], Dict[str, Any]], ident: Callable[[Row], Any],
              extra: Optional[Dict[str, Any]] = None) -> Response:
    """`{key: [render(row), ...], **extra}` as a JSON answer. A row that cannot be rendered (a value stored before
    the input limits, say) is left out and logged, and named in `"omitted": [{"id", "reason"}]`: one bad row never
    breaks a list."""
    parts: List[str] = []
    omitted: List[Dict[str, Any]] = []
    for row in rows:
        try:
            parts.append(_dumps(render(row)))
        except (ValueError, TypeError, RecursionError, KeyError, AttributeError) as e:
            reason = f"{e.__class__.__name__}: {str(e)[:200]}"
            logger.error("%s %s left out of the list: it cannot be shown as JSON (%s)", key, ident(row), reason)
            omitted.append({"id": ident(row), "reason": reason})
    tail = {**(extra or {}), **({"omitted": omitted} if omitted else {})}
    text = '{' + _dumps(key) + ':[' + ','.join(parts) + ']' + ''.join(
        ',' + _dumps(k) + ':' + _dumps(v) for k, v in tail.items()) + '}'
    return Response(text.encode("utf-8"), media_type="application/json")
