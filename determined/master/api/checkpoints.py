"""Checkpoint routes of the CLI and SDK: lookup by uuid, adding and removing metadata."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from determined.master.security import auth
from determined.master.storage import checkpoint_edits
from determined.master.views import serialize
from determined.master.registry import model_registry, trial_sources
from determined.master.api._deps import json_response, master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.checkpoints import (CheckpointAnswer, CheckpointMetadataBody, RemovedFiles,
                                                      RemoveFilesBody, SourceMetrics)
from determined.master.views.dbread import reader_of

router = APIRouter()


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


@router.get("/checkpoints/{uuid}/metrics", response_model=SourceMetrics)
def checkpoint_metrics(request: Request, uuid: str, group: Optional[str] = Query(None, max_length=128),
                       kind: Optional[str] = Query(None, max_length=32)) -> Response:
    """`{trial_ids, metrics}`: the metrics of the trials that reported using the checkpoint (directly or through
    one of its model versions); `group` only that group, `kind` only links of that kind (INFERENCE, FINE_TUNING)."""
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: trial_sources.checkpoint_metrics(reader_of(s), uuid, group, kind),
                             f"the metrics of checkpoint {uuid}")


@router.post("/checkpoints/{uuid}/metadata", response_model=CheckpointAnswer)
def add_metadata(request: Request, uuid: str, body: Optional[CheckpointMetadataBody] = None) -> Dict[str, Any]:
    """Merge `{"metadata": {...}}` into the checkpoint's metadata (top-level keys replaced): the owner of its
    experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = model_registry.add_checkpoint_metadata(s, uuid, _fields(body), auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}


@router.delete("/checkpoints/{uuid}/metadata", response_model=CheckpointAnswer)
def remove_metadata(request: Request, uuid: str, keys: Optional[List[str]] = Query(default=None)) -> Dict[str, Any]:
    """Remove the top-level metadata keys `keys` (repeat the parameter for several); missing keys are ignored. The
    owner of the checkpoint's experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = model_registry.remove_checkpoint_metadata(s, uuid, keys or [], auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}


@router.delete("/checkpoints/{uuid}", response_model=CheckpointAnswer)
def delete_checkpoint(request: Request, uuid: str) -> Dict[str, Any]:
    """Delete the checkpoint's files (the owner of its experiment or an admin; not while it is a model version)."""
    with problems_as_http():
        checkpoint_edits.delete_checkpoint(master_of(request), uuid, auth.principal_of(request))
    with problems_as_http(), master_of(request).read() as s:
        return {"checkpoint": serialize.checkpoint(s, model_registry.get_checkpoint(s, uuid))}


@router.post("/checkpoints/{uuid}/remove_files", response_model=RemovedFiles)
def remove_files(request: Request, uuid: str, body: Optional[RemoveFilesBody] = None) -> Dict[str, Any]:
    """Remove the files matching `{"globs": [...]}`; the checkpoint becomes PARTIALLY_DELETED (DELETED if empty)."""
    with problems_as_http():
        return checkpoint_edits.remove_files(master_of(request), uuid, _fields(body), auth.principal_of(request))
