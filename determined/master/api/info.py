"""GET /master/info."""
from typing import Any, Dict

from fastapi import APIRouter, Request

import determined
from determined.master.api._deps import master_of

router = APIRouter()


@router.get("/master/info")
def master_info(request: Request) -> Dict[str, Any]:
    master = master_of(request)
    return {"version": determined.__version__, "data_dir": str(master.data_dir), "url": master.url,
            "slots": master.total_slots(), "scheduler": master.run_scheduler}
