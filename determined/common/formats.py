"""The one way numbers, sizes, times and durations are written for people: the CLI, the live display and the
master's trial log lines use these; the web UI's `det.fmt*` (master/ui/static/app.js) follow the same rules.

- Numbers: integers as they are; other numbers with 5 significant digits, trailing zeros dropped, exponent form
  below 1e-4 and from 1e5 (Python's `{:.5g}`): 0.98234, 1.2346e-05, 123456.7 -> 1.2346e+05. NaN is `nan`.
- Sizes: bytes in B, KiB, MiB, GiB with one decimal.
- Times: local time `YYYY-MM-DD HH:MM:SS`.
- Durations: `42s`, `3m 07s`, `2h 05m`, `3d 04h`.
"""
import datetime
import math
import re
from typing import Any, Optional, Union

Number = Union[int, float]

# C0 and C1 control characters (tab excepted), DEL, and the Unicode controls that reorder or hide text.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def fmt_number(value: Any) -> str:
    """A number as the CLI and the UI write it; `""` for None; other values as text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.5g}"
    return str(value)


def fmt_bytes(size: Optional[Number]) -> str:
    if size is None:
        return ""
    size = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover  (the loop returns)


def parse_time(value: Any) -> Optional[datetime.datetime]:
    """A datetime (aware, UTC when the text has no zone) from an API timestamp (`...Z`), or None."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime.datetime):
        moment = value
    else:
        try:
            moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def fmt_time(value: Any) -> str:
    """An API timestamp in local time, `YYYY-MM-DD HH:MM:SS`; `""` for none."""
    moment = parse_time(value)
    if moment is None:
        return "" if value in (None, "") else str(value)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def fmt_duration(seconds: Optional[float]) -> str:
    if seconds is None or seconds != seconds:
        return ""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600:02d}h"


def duration_between(start: Any, end: Any = None) -> Optional[float]:
    """Seconds from `start` to `end` (now when None); None without a start."""
    begin = parse_time(start)
    if begin is None:
        return None
    finish = parse_time(end) or datetime.datetime.now(datetime.timezone.utc)
    return (finish - begin).total_seconds()


def escape_control(text: Any) -> str:
    """`text` with control characters written as escapes (`\\x1b`, `\\r`, `\\u202e`): what another user typed
    can never move the cursor, recolour or rewrite the terminal, or reorder what is shown."""
    value = text if isinstance(text, str) else str(text)
    if not _CONTROL.search(value):
        return value
    return _CONTROL.sub(_escape_one, value)


def _escape_one(match: "re.Match[str]") -> str:
    ch = match.group(0)
    named = {"\n": "\\n", "\r": "\\r"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
