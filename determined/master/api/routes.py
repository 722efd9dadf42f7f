"""The one table of the master's routes: every API module under /api/v1, then the web UI's pages.

A new route goes into its area's module with its models in `schemas/`; a new area is one line here. A read that a
data dir can answer without a master (the CLI's fast path) is an entry of determined/master/views/read_table.py
instead, served here by read_routes.py.
"""
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from determined.master import ui
from determined.master.api import (checkpoint_files, checkpoints, cluster, experiments, imports, info, insights,
                                   jobs, models, read_routes, resource_pools, searcher, templates, trial_protocol,
                                   trials, unmanaged, users, workspaces)
from determined.master.api import shell_terminal, tasks

API_PREFIX = "/api/v1"

API_MODULES = (info, experiments, trials, trial_protocol, searcher, unmanaged, checkpoints, checkpoint_files, models,
               cluster, insights, workspaces, templates, users, imports, jobs, tasks, shell_terminal, resource_pools)


def include_all(app: FastAPI) -> None:
    """Every route on `app`: the API modules' routers under API_PREFIX, then the read table's GET routes (after
    them, so that a literal path of a module, `/experiments/ids` say, is never taken for a parameter), then the
    UI's pages."""
    for module in API_MODULES:
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(read_routes.router(), prefix=API_PREFIX)
    app.include_router(ui.router)
    app.add_exception_handler(StarletteHTTPException, ui.not_found_handler)  # a browser's unknown path: a 404 page
