"""Routes of the web UI: the pages, their scripts and styles, and plotly.js from the installed `plotly` package."""
import functools
import pathlib
import re
from typing import Any, Dict, Union

import jinja2
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException

import determined

HERE = pathlib.Path(__file__).resolve().parent
STATIC = HERE / "static"


router = APIRouter(include_in_schema=False)


@functools.lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                              autoescape=jinja2.select_autoescape(["html"]))


def auth_enabled(request: Request) -> bool:
    """Whether this master authenticates API requests (the pages then log in before reading the API)."""
    return any(getattr(m.cls, "__name__", "") == "AuthMiddleware" for m in request.app.user_middleware)


def _page(request: Request, template: str, title: str, **context: Any) -> HTMLResponse:
    ui_config: Dict[str, Any] = {"authEnabled": auth_enabled(request), "version": determined.__version__, **context}
    html = _templates().get_template(template).render(title=title, ui_config=ui_config, **context)
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


def wants_html(request: Request) -> bool:
    """Whether the client is a browser asking for a page (an API client asks for JSON or anything)."""
    return "text/html" in request.headers.get("accept", "")


def not_found_page(request: Request, what: str) -> HTMLResponse:
    """A 404 page: what was asked for, and where to go instead."""
    html = _templates().get_template("not_found.html").render(
        title="Not found", what=what, path=request.url.path,
        ui_config={"authEnabled": auth_enabled(request), "version": determined.__version__, "notFound": True})
    return HTMLResponse(html, status_code=404, headers={"Cache-Control": "no-store"})


def _number(request: Request, value: str, what: str) -> Union[int, HTMLResponse]:
    """`value` as an id, or the 404 page (`/experiments/abc` is no experiment, not a malformed request)."""
    if value.isdigit() and len(value) < 10:
        return int(value)
    return not_found_page(request, f"{what} {value!r}")


@router.get("/", response_class=HTMLResponse)
def experiments_page(request: Request) -> HTMLResponse:
    return _page(request, "experiments.html", "Experiments")


@router.get("/experiments/{experiment_id}", response_class=HTMLResponse)
def experiment_page(request: Request, experiment_id: str) -> HTMLResponse:
    number = _number(request, experiment_id, "experiment")
    if isinstance(number, HTMLResponse):
        return number
    return _page(request, "experiment.html", f"Experiment {number}", experimentId=number)


@router.get("/trials/{trial_id}", response_class=HTMLResponse)
def trial_page(request: Request, trial_id: str) -> HTMLResponse:
    number = _number(request, trial_id, "trial")
    if isinstance(number, HTMLResponse):
        return number
    return _page(request, "trial.html", f"Trial {number}", trialId=number)


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request) -> HTMLResponse:
    return _page(request, "models.html", "Model registry")


@router.get("/models/{name}", response_class=HTMLResponse)
def model_page(request: Request, name: str) -> HTMLResponse:
    return _page(request, "model.html", f"Model {name}", modelName=name)


@router.get("/workspaces", response_class=HTMLResponse)
def workspaces_page(request: Request) -> HTMLResponse:
    return _page(request, "workspaces.html", "Workspaces")


@router.get("/cluster", response_class=HTMLResponse)
def cluster_page(request: Request) -> HTMLResponse:
    return _page(request, "cluster.html", "Cluster")


@router.get("/tasks", response_class=HTMLResponse)
def tasks_page(request: Request) -> HTMLResponse:
    """Interactive tasks: notebooks, commands, TensorBoards (static/tasks.js)."""
    return _page(request, "tasks.html", "Tasks")


_TASK_ID = re.compile(r"^[0-9A-Za-z-]{1,64}$")


@router.get("/tasks/{task_id}/terminal", response_class=HTMLResponse)
def terminal_page(request: Request, task_id: str) -> HTMLResponse:
    """A shell's terminal (static/shell_terminal.js, the WebSocket of api/shell_terminal.py)."""
    if not _TASK_ID.match(task_id):
        return not_found_page(request, f"shell {task_id[:64]!r}")
    return _page(request, "terminal.html", "Terminal", taskId=task_id)


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request) -> HTMLResponse:
    """The job queue of each resource pool (static/jobs.js)."""
    return _page(request, "jobs.html", "Jobs")


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request) -> HTMLResponse:
    return _page(request, "login.html", "Log in")


@router.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    import plotly

    path = pathlib.Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise HTTPException(404, f"plotly.min.js is missing from the plotly package at {path}; reinstall plotly")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


@router.get("/static/{name}")
def static_file(name: str) -> FileResponse:
    path = STATIC / name
    if "/" in name or name.startswith(".") or path.suffix not in _TYPES or not path.is_file():
        raise HTTPException(404, f"no static file {name!r}")
    return FileResponse(path, media_type=_TYPES[path.suffix], headers={"Cache-Control": "no-cache"})


@router.get("/favicon.ico")
def favicon() -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request) -> HTMLResponse:
    """Trials of several experiments side by side (`?experiments=1,2&trials=3,9&metric=validation:NAME`)."""
    return _page(request, "compare.html", "Compare trials")


async def not_found_handler(request: Request, exc: Exception) -> Response:
    """The app's handler of HTTP errors: a path no route answers, asked for by a browser (not under /api/), gets the
    404 page; everything else (API clients, /api/ paths, other statuses) FastAPI's JSON, as before. A handler, not a
    catch-all route: a route added after the UI's is never shadowed, and a wrong method stays a 405."""
    if (isinstance(exc, StarletteHTTPException) and exc.status_code == 404 and exc.detail == "Not Found"
            and not request.url.path.startswith("/api/") and wants_html(request)):
        return not_found_page(request, "page")
    return await http_exception_handler(request, exc)  # type: ignore[arg-type]
