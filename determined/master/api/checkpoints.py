"""Checkpoint routes of the CLI and SDK: lookup by uuid, adding and removing metadata."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Body, Query, Request

from determined.master import reads, registry, serialize
from determined.master.dbread import reader_of
from determined.master.api._deps import master_of, problems_as_http

router = APIRouter()


@router.get("/checkpoints/{uuid}")
def get_checkpoint(request: Request, uuid: str) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return reads.checkpoint(reader_of(s), uuid)


@router.post("/checkpoints/{uuid}/metadata")
def add_metadata(request: Request, uuid: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Merge `{"metadata": {...}}` into the checkpoint's metadata (top-level keys replaced)."""
    with problems_as_http(), master_of(request).write() as s:
        return {"checkpoint": serialize.checkpoint(s, registry.add_checkpoint_metadata(s, uuid, body))}


@router.delete("/checkpoints/{uuid}/metadata")
def remove_metadata(request: Request, uuid: str, keys: Optional[List[str]] = Query(default=None)) -> Dict[str, Any]:
    """Remove the top-level metadata keys `keys` (repeat the parameter for several); missing keys are ignored."""
    with problems_as_http(), master_of(request).write() as s:
        return {"checkpoint": serialize.checkpoint(s, registry.remove_checkpoint_metadata(s, uuid, keys or []))}
