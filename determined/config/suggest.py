"""`did you mean ...?`: the allowed name closest to a misspelled one (config values, fields, CLI commands)."""
import difflib
import re
from typing import Iterable, Optional


def _parts(name: str) -> list:
    return [p for p in re.split(r"[_\-.\s]+", name.lower()) if p]


def closest(value: str, choices: Iterable[str]) -> Optional[str]:
    """The choice a user most likely meant by `value`, or None.

    A different case, a typo (difflib), a prefix (`exp` -> `experiment`), or one part of a compound name
    (`asha` -> `adaptive_asha`, `lr` is not enough: parts of at least 3 letters) all count.
    """
    options = [c for c in dict.fromkeys(choices) if isinstance(c, str)]
    if not isinstance(value, str) or not value or not options:
        return None
    lowered = {c.lower(): c for c in options}
    if value.lower() in lowered:
        return lowered[value.lower()]
    close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
    if close:
        return lowered[close[0]]
    if len(value) < 3:
        return None
    candidates = [c for c in options if c.lower().startswith(value.lower())]
    candidates += [c for c in options if value.lower() in _parts(c) or
                   any(len(p) >= 3 and p == value.lower() for p in _parts(c))]
    candidates += [c for c in options if len(value) >= 4 and value.lower() in c.lower()]
    if not candidates:
        return None
    return min(dict.fromkeys(candidates), key=lambda c: (len(c), c))


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` or `""`."""
    best = closest(value, choices)
    return f" (did you mean {best!r}?)" if best is not None and best != value else ""
