"""GET /master/info."""
from fastapi import APIRouter, Request

import determined
from determined.master.api._deps import master_of
from determined.master.api.schemas.info import MasterInfo

router = APIRouter()


@router.get("/master/info", response_model=MasterInfo)
def master_info(request: Request) -> MasterInfo:
    master = master_of(request)
    rm = master.rm
    # The local resource manager's sandbox (None: not sandboxed), or the Ray one's `sandboxed` (every node said so).
    sandboxed = rm is not None and bool(getattr(rm, "sandboxed", getattr(rm, "sandbox", None) is not None))
    return MasterInfo(**{"version": determined.__version__, "data_dir": str(master.data_dir), "url": master.url,
            "slots": master.total_slots(), "scheduler": master.run_scheduler, "trials_sandboxed": sandboxed})
