"""The files of an experiment's model definition, for its page in the web UI: names, sizes and the text of
the ones that are text (bounded: a model dir holds code, not data)."""
import io
import tarfile
from typing import Any, Dict, List

MAX_FILE_TEXT = 256 * 1024  # the text of a bigger file is left out
MAX_TOTAL_TEXT = 2 * 1024 * 1024  # and the text of files after this much
MAX_FILES = 2000


def _normalise(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def model_files(archive: bytes) -> Dict[str, Any]:
    """`{"files": [{"path", "size", "text"}], "truncated"}`: regular files by path; `text` is null for a
    binary file, one over MAX_FILE_TEXT, or once MAX_TOTAL_TEXT of text was returned; `truncated` when the
    archive has more than MAX_FILES files."""
    files: List[Dict[str, Any]] = []
    total = 0
    truncated = False
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            if len(files) >= MAX_FILES:
                truncated = True
                break
            text = None
            if member.size <= MAX_FILE_TEXT and total + member.size <= MAX_TOTAL_TEXT:
                handle = tar.extractfile(member)
                data = handle.read(MAX_FILE_TEXT + 1) if handle is not None else b""
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None and "\x00" in text:
                    text = None
                total += len(data) if text is not None else 0
            files.append({"path": _normalise(member.name), "size": member.size, "text": text})
    files.sort(key=lambda f: (f["path"].count("/"), f["path"]))
    return {"files": files, "truncated": truncated}
