"""The master's FastAPI application."""
import contextlib
import logging
import os
from typing import Any, AsyncIterator, Optional, Sequence

import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

import determined
from determined.master.security import auth, login_throttle, request_limits, users, web_security
from determined.master.api import contract, proxy, routes
from determined.master.db import utcnow
from determined.master.lifecycle import trial_notes
from determined.master.lifecycle.logs import LogLimits, is_disk_full
from determined.master.master import Master
from determined.master.rm import Slots
from determined.master.rm.base import ResourceManagerFactory
from determined.master.rm.trial_env import TrialUser
from determined.master.scheduling.pools import ClusterPools

logger = logging.getLogger("determined.master")


def create_app(
    data_dir: "str | os.PathLike[str]",
    db_url: Optional[str] = None,
    *,
    run_scheduler: bool,
    url: Optional[str] = None,
    slots: Optional[Slots] = None,
    trial_command: Optional[Sequence[str]] = None,
    preemption_timeout: Optional[float] = None,
    warn_blank_passwords: bool = False,
    resource_manager: Optional[ResourceManagerFactory] = None,
    allowed_hosts: Optional[Sequence[str]] = None,
    storage_roots: Optional[Sequence[str]] = None,
    trial_user: Optional[TrialUser] = None,
    log_limits: Optional[LogLimits] = None,
    storage_endpoints: Optional[Sequence[str]] = None,
    resource_pools: Optional[ClusterPools] = None,
) -> FastAPI:
    """The REST API over the data dir's database (migrated on creation).

    With `run_scheduler`, the app's lifespan starts and stops the scheduler, which launches trial processes
    that reach the master at `url` (or at `Master.start(url)`, called before the app serves). Without it
    the app only reads and records (list, describe, create without running), e.g. in-process for the CLI.
    Every /api/ route but login and /master/info needs a bearer token (determined.master.security.auth);
    `warn_blank_passwords` logs a warning at start while a default user has a blank password (servers).
    `allowed_hosts` (web_security.allowed_hosts) turns on the Host check of a master served on a socket.
    Every response carries the security headers; request bodies are bounded (request_limits.py).
    `storage_roots`, `storage_endpoints`, `trial_user`, `log_limits` and `resource_pools` (scheduling/pools.py)
    are a server's settings (see `Master`).
    """
    kwargs: Any = {}
    if preemption_timeout is not None:
        kwargs["preemption_timeout"] = preemption_timeout
    master = Master(data_dir, db_url, run_scheduler=run_scheduler, url=url, slots=slots,
                    trial_command=trial_command, resource_manager=resource_manager, storage_roots=storage_roots,
                    trial_user=trial_user, log_limits=log_limits, storage_endpoints=storage_endpoints,
                    resource_pools=resource_pools, **kwargs)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if warn_blank_passwords:
            warning = blank_password_warning(master)
            if warning:
                logger.warning(warning)
        if run_scheduler:
            master.start()
        try:
            yield
        finally:
            app.state.hash_pool.shutdown()
            if run_scheduler:
                master.stop()

    app = FastAPI(title="Determined master", version=determined.__version__, lifespan=lifespan)
    app.state.master = master
    app.state.login_throttle = login_throttle.LoginThrottle()
    app.state.hash_pool = login_throttle.HashPool()
    routes.include_all(app)
    app.openapi = lambda: contract.openapi(app)  # type: ignore[method-assign]
    if contract.contract_checked():  # innermost: it sees each route's answer as the route wrote it
        app.add_middleware(contract.AnswerContract)
    # The last added runs first: headers on every answer, then the Host check, then who sends it, and only then
    # is a body read (within its route's limit).
    app.add_middleware(request_limits.RequestLimitMiddleware,
                       trial_note=lambda trial_id, text: _trial_note(master, trial_id, text))
    app.add_middleware(auth.AuthMiddleware, resolver=auth.TrialPrincipalCache(lambda token: _resolve(master, token)))
    app.add_middleware(proxy.TaskProxyMiddleware)  # /proxy/<task id>/: its own checks (api/proxy.py)
    app.state.proxy_gate = proxy.Gate(app)  # shared with the fast lane of plain proxied requests (api/proxy_lane.py)
    app.state.allowed_hosts = None if allowed_hosts is None else frozenset(allowed_hosts)
    if allowed_hosts is not None:
        app.add_middleware(web_security.HostAllowListMiddleware, hosts=list(allowed_hosts))
    app.add_middleware(web_security.SecurityHeadersMiddleware)
    app.add_exception_handler(OverflowError, _out_of_range)
    app.add_exception_handler(sqlalchemy.exc.DataError, _out_of_range)
    app.add_exception_handler(RequestValidationError, contract.invalid_request)
    app.add_exception_handler(sqlalchemy.exc.OperationalError, _database_unavailable)
    return app


async def _database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    """The database refused a write (a full disk, say): 503, nothing was stored, the client may retry later."""
    if not is_disk_full(exc):
        raise exc
    return JSONResponse(status_code=503, content={"detail": {
        "message": "the master's disk is full: nothing was stored; retry when the master's admin has freed space",
        "problems": []}})


async def _out_of_range(_request: Request, exc: Exception) -> JSONResponse:
    """A number the database cannot hold (an id or count past 2**31, say) is bad input, not a server error."""
    del exc
    return JSONResponse(status_code=400, content={"detail": {
        "message": "a number in the request is out of range for the database",
        "problems": ["ids and counts must be whole numbers from 0 to 2147483647"]}})


def _trial_note(master: Master, trial_id: int, text: str) -> None:
    """A line of the master in a trial's logs (a report of the trial refused before any route ran)."""
    if master.log_writer is not None:
        master.log_writer.add(trial_id, utcnow(), trial_notes.STREAM, trial_notes.PREFIX + text)


def _resolve(master: Master, token: str) -> Optional[auth.Principal]:
    with master.read() as s:
        return auth.resolve(s, token)


def blank_password_warning(master: Master) -> Optional[str]:
    """A warning naming the default users whose password is blank, or None."""
    with master.read() as s:
        blank = users.blank_default_users(s)
    if not blank:
        return None
    return (f"the user(s) {', '.join(blank)} have a blank password: anyone who reaches this master can log in as "
            f"them; set one with `det -u admin user change-password USER`")

