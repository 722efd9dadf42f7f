"""Checkpoint routes of the CLI and SDK: lookup by uuid, adding and removing metadata."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response

from determined.master.security import auth
from determined.master.storage import checkpoint_edits
from determined.master.views import reads, serialize
from determined.master.registry import model_registry, trial_sources
from determined.master.api._deps import json_response, master_of, problems_as_http
from determined.master.views.dbread import reader_of

router = APIRouter()


@router.get("/checkpoints/{uuid}")
def get_checkpoint(request: Request, uuid: str) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: reads.checkpoint(reader_of(s), uuid), f"checkpoint {uuid}")


@router.get("/checkpoints/{uuid}/metrics")
def checkpoint_metrics(request: Request, uuid: str, group: Optional[str] = Query(None, max_length=128),
                       kind: Optional[str] = Query(None, max_length=32)) -> Response:
    """`{trial_ids, metrics}`: the metrics of the trials that reported using the checkpoint (directly or through
    one of its model versions); `group` only that group, `kind` only links of that kind (INFERENCE, FINE_TUNING)."""
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: trial_sources.checkpoint_metrics(reader_of(s), uuid, group, kind),
                             f"the metrics of checkpoint {uuid}")


@router.post("/checkpoints/{uuid}/metadata")
def add_metadata(request: Request, uuid: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Merge `{"metadata": {...}}` into the checkpoint's metadata (top-level keys replaced): the owner of its
    experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = model_registry.add_checkpoint_metadata(s, uuid, body, auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}


@router.delete("/checkpoints/{uuid}/metadata")
def remove_metadata(request: Request, uuid: str, keys: Optional[List[str]] = Query(default=None)) -> Dict[str, Any]:
    """Remove the top-level metadata keys `keys` (repeat the parameter for several); missing keys are ignored. The
    owner of the checkpoint's experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = model_registry.remove_checkpoint_metadata(s, uuid, keys or [], auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}



@router.delete("/checkpoints/{uuid}")
def delete_checkpoint(request: Request, uuid: str) -> Dict[str, Any]:
    """Delete the checkpoint's files (the owner of its experiment or an admin; not while it is a model version)."""
    with problems_as_http():
        checkpoint_edits.delete_checkpoint(master_of(request), uuid, auth.principal_of(request))
    with problems_as_http(), master_of(request).read() as s:
        return {"checkpoint": serialize.checkpoint(s, model_registry.get_checkpoint(s, uuid))}


@router.post("/checkpoints/{uuid}/remove_files")
def remove_files(request: Request, uuid: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Remove the files matching `{"globs": [...]}`; the checkpoint becomes PARTIALLY_DELETED (DELETED if empty)."""
    with problems_as_http():
        return checkpoint_edits.remove_files(master_of(request), uuid, body, auth.principal_of(request))
