"""A trial's log lines with the filters of Determined 0.38's `det trial logs` and `Trial.iter_logs` (head, tail,
ranks, stdout/stderr, minimum level, time window, sources, text), following new lines while the trial runs.

Each line is `{"id", "timestamp", "stream", "message", "level", "rank_id", "source"}`: `level` is the logging
level the line starts with (after a `[rank=N] ` prefix and an optional logger timestamp), INFO when it names
none; `source` is `master` for the platform's own lines, else `trial`.
"""
import datetime
import re
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

from determined import errors

LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
STDTYPES = ("stdout", "stderr")
SOURCES = ("trial", "master")
_TERMINAL = ("COMPLETED", "CANCELED", "ERROR")
_RANK = re.compile(r"^\[rank=(\d+)\] ")
_LEVEL = re.compile(r"^(?:[\d\-:,.T ]+\s)?\[?(TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b", re.IGNORECASE)


def level_of(message: str) -> str:
    text = _RANK.sub("", message, count=1)
    match = _LEVEL.match(text)
    if not match:
        return "INFO"
    name = match.group(1).upper()
    return {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(name, name)


def rank_of(message: str) -> Optional[int]:
    match = _RANK.match(message)
    return int(match.group(1)) if match else None


def _time(value: Any, what: str) -> Optional[datetime.datetime]:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise errors.DeterminedError(f"{what} must be an ISO 8601 time (e.g. 2024-05-01T12:00:00Z), not {value!r}") from None
    return _time(parsed, what) if parsed.tzinfo is not None else parsed


def _choices(values: Optional[Iterable[str]], allowed: Sequence[str], what: str) -> Optional[List[str]]:
    if values is None:
        return None
    out = [str(v).lower() for v in ([values] if isinstance(values, str) else values)]
    bad = [v for v in out if v not in allowed]
    if bad:
        raise errors.DeterminedError(f"{what}: {', '.join(bad)} unknown; choose from {', '.join(allowed)}")
    return out


class LogFilter:
    def __init__(self, *, rank_ids: Optional[Iterable[int]] = None, stdtypes: Optional[Iterable[str]] = None,
                 min_level: Optional[Any] = None, timestamp_before: Any = None, timestamp_after: Any = None,
                 sources: Optional[Iterable[str]] = None, search_text: Optional[str] = None) -> None:
        self.rank_ids = set(int(r) for r in rank_ids) if rank_ids is not None else None
        self.stdtypes = _choices(stdtypes, STDTYPES, "stdtypes")
        self.sources = _choices(sources, SOURCES, "sources")
        level = getattr(min_level, "name", min_level)
        if level is not None and str(level).upper() not in LEVELS:
            raise errors.DeterminedError(f"min_level {min_level!r} unknown; choose from {', '.join(LEVELS)}")
        self.min_level = LEVELS.index(str(level).upper()) if level is not None else None
        self.before = _time(timestamp_before, "timestamp_before")
        self.after = _time(timestamp_after, "timestamp_after")
        self.search_text = search_text

    def keep(self, line: Dict[str, Any]) -> bool:
        if self.rank_ids is not None and line["rank_id"] not in self.rank_ids:
            return False
        if self.stdtypes is not None and line.get("stream") not in self.stdtypes:
            return False
        if self.sources is not None and line["source"] not in self.sources:
            return False
        if self.min_level is not None and LEVELS.index(line["level"]) < self.min_level:
            return False
        stamp = _time(line.get("timestamp"), "timestamp") if (self.before or self.after) else None
        if self.before is not None and (stamp is None or stamp >= self.before):
            return False
        if self.after is not None and (stamp is None or stamp <= self.after):
            return False
        return self.search_text is None or self.search_text in line["message"]


def _annotated(entry: Dict[str, Any]) -> Dict[str, Any]:
    message = entry["message"]
    return {**entry, "level": level_of(message), "rank_id": rank_of(message),
            "source": "master" if entry.get("stream") == "master" else "trial"}


def trial_logs(session: Any, trial_id: int, *, follow: bool = False, head: Optional[int] = None,
               tail: Optional[int] = None, poll: float = 0.5, **filters: Any) -> Iterator[Dict[str, Any]]:
    """The trial's log lines that pass `filters` (LogFilter's arguments): the first `head`, or the last `tail`, or
    all; with `follow`, then the new ones until the trial ends."""
    for name, value in (("head", head), ("tail", tail)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise errors.DeterminedError(f"{name} must be a number of lines (0 or more), not {value!r}")
    if head is not None and tail is not None:
        raise errors.DeterminedError("give head or tail, not both")
    from determined.experimental.client._records import trial_log_page

    keep = LogFilter(**filters).keep
    offset, state, shown, last = 0, "", 0, []
    while True:  # what is there now
        page = trial_log_page(session, trial_id, offset)
        offset, state = page.next_offset, page.trial_state or state
        for entry in page.logs:
            line = _annotated(entry)
            if not keep(line):
                continue
            if head is not None:
                if shown >= head:
                    return
                shown += 1
                yield line
            elif tail is not None:
                last = (last + [line])[-tail:] if tail else []
            else:
                yield line
        if not page.logs:
            break
    yield from last
    if not follow or head is not None:
        return
    while True:
        page = trial_log_page(session, trial_id, offset)
        offset, state = page.next_offset, page.trial_state or state
        for entry in page.logs:
            line = _annotated(entry)
            if keep(line):
                yield line
        if not page.logs:
            if state in _TERMINAL:
                return
            time.sleep(poll)
