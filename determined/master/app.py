"""The master's FastAPI application."""
import contextlib
import os
from typing import Any, AsyncIterator, Optional, Sequence

from fastapi import APIRouter, FastAPI

import determined
from determined.master.api import api_router, checkpoints, models
from determined.master.master import Master
from determined.master.rm import Slots


def create_app(
    data_dir: "str | os.PathLike[str]",
    db_url: Optional[str] = None,
    *,
    run_scheduler: bool,
    url: Optional[str] = None,
    slots: Optional[Slots] = None,
    trial_command: Optional[Sequence[str]] = None,
    preemption_timeout: Optional[float] = None,
) -> FastAPI:
    """The REST API over the data dir's database (migrated on creation).

    With `run_scheduler`, the app's lifespan starts and stops the scheduler, which launches trial processes
    that reach the master at `url` (or at `Master.start(url)`, called before the app serves). Without it
    the app only reads and records (list, describe, create without running), e.g. in-process for the CLI.
    """
    kwargs: Any = {}
    if preemption_timeout is not None:
        kwargs["preemption_timeout"] = preemption_timeout
    master = Master(data_dir, db_url, run_scheduler=run_scheduler, url=url, slots=slots,
                    trial_command=trial_command, **kwargs)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if run_scheduler:
            master.start()
        try:
            yield
        finally:
            if run_scheduler:
                master.stop()

    app = FastAPI(title="Determined master", version=determined.__version__, lifespan=lifespan)
    app.state.master = master
    app.include_router(api_router)
    app.include_router(registry_router)
    return app


# The checkpoint and model registry routes, under the same prefix as the rest of the API.
registry_router = APIRouter(prefix="/api/v1")
for _module in (checkpoints, models):
    registry_router.include_router(_module.router)
