"""Checkpoint routes of the CLI and SDK: lookup by uuid, adding and removing metadata."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response, StreamingResponse

from determined.master import auth, reads, registry, serialize
from determined.master.api._deps import json_response, master_of, problems_as_http
from determined.master.dbread import reader_of
from determined.master.problems import RequestProblem

router = APIRouter()


@router.get("/checkpoints/{uuid}")
def get_checkpoint(request: Request, uuid: str) -> Response:
    with problems_as_http(), master_of(request).read() as s:
        return json_response(lambda: reads.checkpoint(reader_of(s), uuid), f"checkpoint {uuid}")


@router.post("/checkpoints/{uuid}/metadata")
def add_metadata(request: Request, uuid: str, body: Any = Body(None)) -> Dict[str, Any]:
    """Merge `{"metadata": {...}}` into the checkpoint's metadata (top-level keys replaced): the owner of its
    experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = registry.add_checkpoint_metadata(s, uuid, body, auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}


@router.delete("/checkpoints/{uuid}/metadata")
def remove_metadata(request: Request, uuid: str, keys: Optional[List[str]] = Query(default=None)) -> Dict[str, Any]:
    """Remove the top-level metadata keys `keys` (repeat the parameter for several); missing keys are ignored. The
    owner of the checkpoint's experiment or an admin."""
    with problems_as_http(), master_of(request).write() as s:
        ckpt = registry.remove_checkpoint_metadata(s, uuid, keys or [], auth.principal_of(request))
        return {"checkpoint": serialize.checkpoint(s, ckpt)}


_CHUNK = 1024 * 1024


@router.get("/checkpoints/{uuid}/download")
def download_checkpoint(request: Request, uuid: str) -> StreamingResponse:
    """The checkpoint's files as a .tar.gz (`<uuid>/...`), read from its storage (shared_fs or S3)."""
    import tarfile
    import tempfile

    from determined import storage

    master = master_of(request)
    with problems_as_http():
        with master.read() as s:
            answer = reads.checkpoint(reader_of(s), uuid)["checkpoint"]
            config = reads.experiment_row(reader_of(s), answer["experiment_id"]).config
        if answer["state"] != "COMPLETED":
            raise RequestProblem(409, f"checkpoint {uuid} is {answer['state']}; only a COMPLETED checkpoint has files "
                                      "to download")
        manager = storage.build_storage_manager(config.get("checkpoint_storage") or {})
        archive = tempfile.TemporaryFile()
        try:
            with manager.restore_path(uuid) as path, tarfile.open(fileobj=archive, mode="w:gz") as tar:
                tar.add(str(path), arcname=uuid)  # links are kept as links, never followed
        except Exception as e:
            archive.close()
            raise RequestProblem(502, f"checkpoint {uuid}: could not read its files from storage: {e}") from None
    size = archive.tell()
    archive.seek(0)

    def chunks() -> Any:
        try:
            while True:
                data = archive.read(_CHUNK)
                if not data:
                    return
                yield data
        finally:
            archive.close()

    filename = "".join(ch for ch in uuid if ch.isalnum() or ch in "._-")[:100] or "checkpoint"
    return StreamingResponse(chunks(), media_type="application/gzip", headers={
        "Content-Disposition": f'attachment; filename="{filename}.tar.gz"', "Content-Length": str(size)})
