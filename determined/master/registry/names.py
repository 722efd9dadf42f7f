"""Names and texts users choose and the master stores: model names, labels, metric names, descriptions, and the
size of an experiment's config.

Each check returns the value or raises RequestProblem(400) that says what is allowed. Usernames have their own,
stricter rule (determined/master/security/users.py). Limits are listed in docs/server.md ("Input limits").
"""
import json
import unicodedata
from typing import Any, Dict, Iterable, List, Optional

from determined.master.problems import RequestProblem
from determined.master.security.request_limits import clip_repr

MAX_NAME_CHARS = 256
MAX_LABEL_CHARS = 255
MAX_LABELS = 100
MAX_METRIC_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 16 * 1024

NAME_RULE = (f"1 to {MAX_NAME_CHARS} characters without control characters, '/' or '\\', no leading or trailing "
             "spaces, and not '.' or '..'")
# experiment and model version names may hold '/'
SLASHED_NAME_RULE = (f"allowed: 1 to {MAX_NAME_CHARS} characters without control characters (bidi overrides, "
                     "line separators), no leading or trailing spaces, and not '.' or '..'")


def _bad_character(text: str, allowed: str = "") -> Optional[str]:
    """The first character of `text` that is a control, format or separator character (e.g. NUL, backspace, a
    right-to-left override, a line separator), described; None when there is none."""
    for ch in text:
        if ch in allowed:
            continue
        category = unicodedata.category(ch)
        if category[0] == "C" or category in ("Zl", "Zp"):
            return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'a control character').lower()})"
    return None


def name_problem(value: Any, *, max_chars: int = MAX_NAME_CHARS, slashes: bool = False) -> Optional[str]:
    """Why `value` is not a valid name, or None."""
    if not isinstance(value, str):
        return f"expected a string, got {clip_repr(value, 60)}"
    if not value.strip():
        return "must not be empty or only spaces"
    if len(value) > max_chars:
        return f"{len(value)} characters; at most {max_chars} are allowed"
    bad = _bad_character(value)
    if bad:
        return f"{clip_repr(value, 80)} contains the character {bad}"
    if value != value.strip():
        return f"{clip_repr(value, 80)} starts or ends with a space"
    if not slashes and ("/" in value or "\\" in value):
        return f"{clip_repr(value, 80)} contains '/' or '\\'"
    if value in (".", ".."):
        return f"{value!r} is not a name"
    return None


def check_name(value: Any, field: str, what: str) -> str:
    """A name of something the master stores (a model, ...): see NAME_RULE."""
    problem = name_problem(value)
    if problem:
        raise RequestProblem(400, f"invalid {what}: {problem}", [f"{field}: {problem}; allowed: {NAME_RULE}"])
    return value  # type: ignore[no-any-return]


def label_problems(labels: Any, field: str = "labels") -> List[str]:
    """What is wrong with experiment labels: at most MAX_LABELS names of at most MAX_LABEL_CHARS characters ('/' is
    allowed)."""
    if labels is None:
        return []
    if not isinstance(labels, (list, tuple)):
        return [f"{field}: expected a list of strings"]
    problems = []
    if len(labels) > MAX_LABELS:
        problems.append(f"{field}: {len(labels)} labels; at most {MAX_LABELS} are allowed")
    for i, label in enumerate(labels[:MAX_LABELS]):
        problem = name_problem(label, max_chars=MAX_LABEL_CHARS, slashes=True)
        if problem:
            problems.append(f"{field}[{i}]: {problem}; a label is 1 to {MAX_LABEL_CHARS} characters without control "
                            "characters or leading and trailing spaces")
    return problems


def check_metric_names(names: Iterable[Any], field: str) -> None:
    """Metric names: strings of 1 to MAX_METRIC_NAME_CHARS characters without control characters."""
    for name in names:
        if (isinstance(name, str) and 0 < len(name) <= MAX_METRIC_NAME_CHARS
                and (name.isprintable() or _bad_character(name, " ") is None)):
            continue
        problem = name_problem(name, max_chars=MAX_METRIC_NAME_CHARS, slashes=True) or "not a valid name"
        raise RequestProblem(400, f"invalid metric name in {field}", [
            f"{field}: metric name {problem}; metric names are 1 to {MAX_METRIC_NAME_CHARS} characters without "
            "control characters"])


def description_problem(value: Any, field: str = "description") -> Optional[str]:
    """What is wrong with a description: text of at most MAX_DESCRIPTION_CHARS characters without NUL (newlines and
    tabs are fine)."""
    if not isinstance(value, str):
        return f"{field}: expected a string, got {clip_repr(value, 60)}"
    if len(value) > MAX_DESCRIPTION_CHARS:
        return f"{field}: {len(value)} characters; at most {MAX_DESCRIPTION_CHARS} are allowed"
    if "\x00" in value:
        return f"{field}: contains a NUL character (U+0000), which cannot be stored"
    return None


def check_description(value: Any, field: str = "description") -> str:
    problem = description_problem(value, field)
    if problem:
        raise RequestProblem(400, f"invalid {field}", [problem])
    return value  # type: ignore[no-any-return]


MAX_CONFIG_BYTES = 1024 * 1024


def experiment_config_problems(config: Dict[str, Any]) -> List[str]:
    """What the master refuses to store in a (canonical) experiment config: its size, name, description and labels,
    by the same rules as `PATCH /experiments/{id}` (lifecycle/experiment_edits.py)."""
    problems = []
    if config.get("name") is not None:
        problem = name_problem(config["name"], slashes=True)
        problems += [f"name: {problem}; {SLASHED_NAME_RULE}"] if problem else []
    size = len(json.dumps(config, separators=(",", ":")))
    if size > MAX_CONFIG_BYTES:
        problems.append(f"config: {size} bytes of JSON; at most {MAX_CONFIG_BYTES} are allowed (keep data in files of "
                        "the model directory or in storage, and read it in the trial)")
    if config.get("description") is not None:
        problems += [p for p in [description_problem(config["description"])] if p]
    problems += label_problems(config.get("labels"))
    return problems
