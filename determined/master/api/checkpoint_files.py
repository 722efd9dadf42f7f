"""`GET /checkpoints/{uuid}/files`: a checkpoint's files as a tar stream, read by the master from its storage.

Clients see storage configs with their secrets hidden (determined/config/redaction.py), so a checkpoint in S3
with keys in its experiment's config is downloaded through the master, which holds them. Only regular files and directories
are sent, never followed links: a link a trial planted in its checkpoint directory leads nowhere.
"""
import os
import queue
import stat
import tarfile
import threading
from typing import Any, Iterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from determined.master.registry import model_registry
from determined.master.lifecycle import states
from determined.master.api._deps import master_of, problems_as_http
from determined.master.db import Experiment
from determined.master.problems import RequestProblem
from determined.storage import StorageManager, build_storage_manager

router = APIRouter()

CHUNK = 1 << 20
_DONE = object()


class TarResponse(StreamingResponse):
    """A streamed tar archive."""

    media_type = "application/x-tar"


@router.get("/checkpoints/{uuid}/files", response_class=TarResponse,
            responses={200: {"description": "The checkpoint's files as an uncompressed tar archive.",
                             "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}}})
def checkpoint_files(request: Request, uuid: str) -> StreamingResponse:
    """The checkpoint's files as an uncompressed tar archive (paths relative to the checkpoint's directory)."""
    master = master_of(request)
    with problems_as_http():
        with master.read() as s:
            ckpt = model_registry.get_checkpoint(s, uuid)
            if ckpt.state != states.COMPLETED:
                raise RequestProblem(409, f"checkpoint {uuid} is {ckpt.state}: only COMPLETED checkpoints have files")
            exp = s.get(Experiment, ckpt.experiment_id)
            storage_config = exp.config.get("checkpoint_storage") if exp is not None else None
        refusal = master.storage_refusal(storage_config)
        if refusal:
            raise RequestProblem(409, f"the master does not read checkpoint {uuid}: {refusal}")
        try:
            manager = build_storage_manager(storage_config)
        except Exception as e:
            raise RequestProblem(502, f"the master cannot reach the storage of checkpoint {uuid}: {e}") from None
    return StreamingResponse(_tar_chunks(manager, uuid), media_type="application/x-tar")  # a COMPLETED checkpoint


class _QueueWriter:
    """A write-only file object whose writes become chunks of a bounded queue (the producer waits when full)."""

    def __init__(self, chunks: "queue.Queue[Any]", cancelled: threading.Event) -> None:
        self.chunks = chunks
        self.cancelled = cancelled
        self.buffer = bytearray()

    def write(self, data: bytes) -> int:
        self.buffer += data
        while len(self.buffer) >= CHUNK:
            self._put(bytes(self.buffer[:CHUNK]))
            del self.buffer[:CHUNK]
        return len(data)

    def flush_all(self) -> None:
        if self.buffer:
            self._put(bytes(self.buffer))
            self.buffer.clear()

    def _put(self, item: Any) -> None:
        while not self.cancelled.is_set():
            try:
                self.chunks.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
        raise _Cancelled()


class _Cancelled(Exception):
    pass


def _tar_chunks(manager: StorageManager, uuid: str) -> Iterator[bytes]:
    chunks: "queue.Queue[Any]" = queue.Queue(maxsize=8)
    cancelled = threading.Event()

    def produce() -> None:
        writer = _QueueWriter(chunks, cancelled)
        try:
            with manager.restore_path(uuid, completed=True) as root, tarfile.open(fileobj=writer, mode="w|") as tar:  # type: ignore[call-overload]
                _add_tree(tar, str(root))
            writer.flush_all()
            writer._put(_DONE)
        except _Cancelled:
            return
        except BaseException as e:  # told to the reader, which ends the response early
            try:
                writer._put(e)
            except _Cancelled:
                pass

    thread = threading.Thread(target=produce, name=f"checkpoint-files-{uuid}", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        cancelled.set()


def _add_tree(tar: tarfile.TarFile, root: str) -> None:
    """Add the regular files and directories under `root`, never following or sending a link."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir != ".":
            tar.addfile(_info(rel_dir, os.lstat(dirpath)))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:  # a link (or gone): not part of the checkpoint
                continue
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if stat.S_ISREG(st.st_mode):
                    rel = name if rel_dir == "." else os.path.join(rel_dir, name)
                    tar.addfile(_info(rel, st), f)


def _info(name: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name.replace(os.sep, "/"))
    info.mtime = int(st.st_mtime)
    info.mode = 0o755 if stat.S_ISDIR(st.st_mode) else 0o644
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    else:
        info.size = st.st_size
    return info
