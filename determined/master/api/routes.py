"""The one table of the master's routes: every API module under /api/v1, then the web UI's pages.

A new route goes into its area's module with its models in `schemas/`; a new area is one line here.
"""
from fastapi import FastAPI

from determined.master import ui
from determined.master.api import (checkpoint_files, checkpoints, cluster, experiments, info, insights, models,
                                   searcher, templates, trial_protocol, trials, unmanaged, users, workspaces)

API_PREFIX = "/api/v1"

API_MODULES = (info, experiments, trials, trial_protocol, searcher, unmanaged, checkpoints, checkpoint_files, models,
               cluster, insights, workspaces, templates, users)


def include_all(app: FastAPI) -> None:
    """Every route on `app`: the API modules' routers under API_PREFIX, then the UI's pages."""
    for module in API_MODULES:
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(ui.router)
