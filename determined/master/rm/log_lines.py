"""Lines of a trial process's output, each cut to a limit (the master's trial logs, docs/server.md).

Reading stays bounded in memory whatever a process writes: the part of a line beyond the limit is read in
pieces and thrown away, and the stored line ends with a marker saying how many bytes were cut. Standard
library only: the Ray worker reads its trial's output with it on every node.
"""
import re
from typing import IO, Iterator

MARKER = "[master] "  # starts every line the master adds to a trial's logs
DEFAULT_LINE_BYTES = 64 * 1024
_CUT = re.compile(r" \[master\] \[\d+ bytes cut: the line was longer than the [^\]]+ limit\]$")


def size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def cut_marker(cut: int, limit: int) -> str:
    return f" {MARKER}[{cut} bytes cut: the line was longer than the {size_text(limit)} limit]"


def cap_line(message: str, limit: int) -> str:
    """`message`, or its first `limit` bytes (whole UTF-8 characters) and a marker when it is longer; a line
    already cut to `limit` (it ends with its marker) is left as it is."""
    if len(message) * 4 <= limit:  # cheap: no encoding needed
        return message
    data = message.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return message
    cut = _CUT.search(message)
    if cut is not None and len(message[:cut.start()].encode("utf-8", errors="replace")) <= limit:
        return message
    return data[:limit].decode("utf-8", errors="ignore") + cut_marker(len(data) - limit, limit)


def capped_lines(pipe: IO[bytes], limit: int, chunk: int = 1 << 16) -> Iterator[str]:
    """The lines of `pipe` (without their newline), each at most `limit` bytes: the rest of a longer line is
    read and thrown away, counted in the line's marker; memory stays bounded whatever the line's length."""
    while True:
        head = pipe.readline(limit + 1)
        if not head:
            return
        if head.endswith(b"\n") or len(head) <= limit:
            yield head.rstrip(b"\n").decode("utf-8", errors="replace")
            continue
        cut = len(head) - limit
        while True:  # the rest of the line, read in bounded pieces
            rest = pipe.readline(chunk)
            if not rest:
                break
            if rest.endswith(b"\n"):
                cut += len(rest) - 1
                break
            cut += len(rest)
        text = head[:limit].decode("utf-8", errors="ignore")
        yield text + cut_marker(cut, limit)
