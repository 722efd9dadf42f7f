"""The master's REST API under /api/v1 (docs/internals.md)."""
from fastapi import APIRouter

from determined.master.api import experiments, info, searcher, trial_protocol, trials, unmanaged

api_router = APIRouter(prefix="/api/v1")
for _module in (info, experiments, trials, trial_protocol, searcher, unmanaged):
    api_router.include_router(_module.router)

__all__ = ["api_router"]
