"""Routes of the web UI: the pages, their scripts and styles, and plotly.js from the installed `plotly` package."""
import functools
import pathlib
from typing import Any, Dict

import jinja2
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

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


@router.get("/", response_class=HTMLResponse)
def experiments_page(request: Request) -> HTMLResponse:
    return _page(request, "experiments.html", "Experiments")


@router.get("/experiments/{experiment_id}", response_class=HTMLResponse)
def experiment_page(request: Request, experiment_id: int) -> HTMLResponse:
    return _page(request, "experiment.html", f"Experiment {experiment_id}", experimentId=experiment_id)


@router.get("/trials/{trial_id}", response_class=HTMLResponse)
def trial_page(request: Request, trial_id: int) -> HTMLResponse:
    return _page(request, "trial.html", f"Trial {trial_id}", trialId=trial_id)


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
