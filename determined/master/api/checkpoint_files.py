"""`GET /checkpoints/{uuid}/files`: a checkpoint's files as a tar stream, read by the master from its storage.

Clients see storage configs with their secrets hidden (determined/config/redaction.py), so a checkpoint in S3
with keys in its experiment's config is downloaded through the master, which holds them. The files are streamed
as they are read (an S3 object straight from its GET, never into a file of the master's), each exactly the size
its storage lists, and reading stops when the client goes (a bounded queue between the reader and the answer).
Nothing is followed: a checkpoint directory that is a link is refused, a link inside that stays inside goes as a
link, one leading out of it is left out (and logged) (determined/storage/_safe_tree.py).
"""
import logging
import queue
import tarfile
import threading
from typing import Any, Iterator, List

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from determined.master.registry import model_registry
from determined.master.lifecycle import states
from determined.master.api._deps import master_of, problems_as_http
from determined.master.db import Experiment
from determined.master.problems import RequestProblem
from determined.master.storage.access import storage_manager
from determined.storage import StorageManager, _safe_tree

logger = logging.getLogger("determined.master")
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
            manager = storage_manager(master, storage_config)
        except Exception as e:
            raise RequestProblem(502, f"the master cannot reach the storage of checkpoint {uuid}: {e}") from None
        cancelled = threading.Event()
        chunks = _tar_chunks(manager, uuid, cancelled)  # a COMPLETED checkpoint
        try:
            first = next(chunks)  # a refusal (a linked checkpoint directory, storage errors) before any byte is sent
        except StopIteration:
            first = b""
        except _safe_tree.LinkedCheckpoint as e:
            cancelled.set()
            raise RequestProblem(409, f"the master does not read checkpoint {uuid}: {e}") from None
        except Exception as e:
            cancelled.set()
            raise RequestProblem(502, f"the master cannot read checkpoint {uuid} from its storage: {e}") from None
    return _CancellableStream(_prepend(first, chunks), cancelled)


class _CancellableStream(StreamingResponse):
    """A tar stream whose reading stops once the answer is over: sent whole, or its client gone (Starlette ends a
    streamed answer when the client disconnects; the iterator itself may never be closed then)."""

    def __init__(self, content: Iterator[bytes], cancelled: threading.Event) -> None:
        super().__init__(content, media_type="application/x-tar")
        self._cancelled = cancelled

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._cancelled.set()


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    try:
        if first:
            yield first
        yield from rest
    finally:
        rest.close()  # type: ignore[attr-defined]


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


def _tar_chunks(manager: StorageManager, uuid: str, cancelled: threading.Event) -> Iterator[bytes]:
    """The tar archive in chunks, written by a thread into a bounded queue; both sides stop once `cancelled`."""
    chunks: "queue.Queue[Any]" = queue.Queue(maxsize=8)

    def produce() -> None:
        writer = _QueueWriter(chunks, cancelled)
        try:
            with tarfile.open(fileobj=writer, mode="w|") as tar:  # type: ignore[call-overload]
                _add_entries(tar, manager, uuid)
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
            try:
                item = chunks.get(timeout=0.5)
            except queue.Empty:
                if cancelled.is_set():
                    return
                continue
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        cancelled.set()


def _add_entries(tar: tarfile.TarFile, manager: StorageManager, uuid: str) -> None:
    """Add the checkpoint's directories, regular files and the links that stay inside it (as links); a link leading
    out of it, a fifo or a device is left out and logged. Nothing is followed (StorageManager.read_files)."""
    skipped: List[_safe_tree.Entry] = []
    entries = manager.read_files(uuid, completed=True)
    try:
        for entry in entries:
            if entry.kind == _safe_tree.DIR:
                tar.addfile(_info(entry.path, tarfile.DIRTYPE, entry.mtime))
            elif entry.kind == _safe_tree.FILE and entry.open is not None:
                info = _info(entry.path, tarfile.REGTYPE, entry.mtime)
                info.size = entry.size
                with entry.open() as f:
                    tar.addfile(info, f)
            elif entry.kind == _safe_tree.LINK:
                info = _info(entry.path, tarfile.SYMTYPE, entry.mtime)
                info.linkname = entry.target
                tar.addfile(info)
            else:
                skipped.append(entry)
    finally:
        getattr(entries, "close", lambda: None)()
    if skipped:
        logger.warning("checkpoint %s: GET /files %s", uuid, _safe_tree.describe_skipped(skipped))


def _info(name: str, kind: bytes, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = int(mtime)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o777 if kind == tarfile.SYMTYPE else 0o644
    return info
